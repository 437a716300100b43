"""Serving a model request on any route: answers, pacing, gates, faults and stats.

The :class:`Handler` is dialect-blind: a :class:`~rolltap.sim.plan.Dialect` supplies the
wire bytes (a :class:`~rolltap.sim.plan.Plan` per body) and the error shape; everything
else (time to first token, token pacing, ``x-sim-fault``, ``x-sim-gate``, the answer cache
and the counters) is shared by every route.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from rolltap.errors import ConfigError
from rolltap.sim.config import FaultSpec, SimConfig, parse_fault
from rolltap.sim.content import BadRequest
from rolltap.sim.plan import Dialect, Plan
from rolltap.sim.prefix import PrefixCache, PromptBlocks, prompt_blocks
from rolltap.sim.script import ScriptPlayer, ScriptTurn, session_of
from rolltap.sim.stats import Gate, StatsBoard
from rolltap.sim.wire import reset_connection, send

__all__ = ["Handler"]

# Bounds on the answer cache: entries, and bytes held by bodies and rendered answers.
_CACHE_ENTRIES = 4096
_CACHE_BYTES = 64 * 1024 * 1024
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass(slots=True)
class _Call:
    """One request in flight."""

    dialect: Dialect
    request: web.BaseRequest
    number: int
    headers: dict[str, str]
    plan: Plan
    fault: FaultSpec | None
    gate: Gate | None
    #: the prompt's cache blocks, when the config counts prompts and the route fills one
    blocks: PromptBlocks | None
    response: web.StreamResponse | None = None
    #: set when the simulator itself cut the connection (drop/reset), not the client
    cut: bool = False


@dataclass(frozen=True, slots=True)
class _Planned:
    """What is kept per request body: the answer, and the prompt's cache blocks."""

    plan: Plan
    blocks: PromptBlocks | None


class _Refused(Exception):
    """The request was answered with an error before any work (bad JSON, bad fault)."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        self.response = response


class Handler:
    """Serves every model route of one :class:`~rolltap.sim.Simulator`."""

    def __init__(self, config: SimConfig, board: StatsBoard, gate: Callable[[str], Gate]) -> None:
        self._config = config
        self._board = board
        self._gate = gate
        self._player = ScriptPlayer(config.script) if config.script is not None else None
        self._rng = random.Random(config.seed)
        # Answers depend only on the route and the body bytes, so repeated bodies skip all
        # generation.
        self._plans: dict[tuple[str, bytes], _Planned] = {}
        #: the prompts' prefix cache (see :mod:`rolltap.sim.prefix`)
        self.cache = PrefixCache(config.prefix_cache_blocks, config.prefix_block_tokens)
        self._cached_bytes = 0
        #: set while the simulator shuts down: cancellations then are not client disconnects
        self.closing = False

    async def handle(
        self, dialect: Dialect, request: web.BaseRequest, number: int, headers: dict[str, str]
    ) -> web.StreamResponse:
        """Count, answer, and classify how the request ended."""
        stats = self._board.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        stats.last_request_headers = {k.lower(): v for k, v in request.headers.items()}
        stats.count_routing(request.headers)
        transport = request.transport
        self._board.saw_peer(transport.get_extra_info("peername") if transport else None)
        call: _Call | None = None
        try:
            try:
                call = await self._admit(dialect, request, number, headers)
            except _Refused as refused:
                await send(request, refused.response)
                stats.completed += 1
                return refused.response
            await self._serve(call)
            if not call.cut:
                stats.completed += 1
            # After a cut aiohttp's attempt to finish this response fails quietly.
            return call.response or web.Response(status=500)
        except asyncio.CancelledError:
            self._count_disconnect(call)
            raise
        except ConnectionError:
            # aiohttp finishes the response and quietly drops it on the dead connection.
            self._count_disconnect(call)
            return call.response if call and call.response else web.Response()
        finally:
            stats.in_flight -= 1
            await self._board.changed()

    def _count_disconnect(self, call: _Call | None) -> None:
        if not self.closing and not (call and call.cut):
            self._board.stats.disconnected += 1

    async def _admit(
        self, dialect: Dialect, request: web.BaseRequest, number: int, headers: dict[str, str]
    ) -> _Call:
        raw = await request.content.read()  # no client_max_size: agent histories get large
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._board.stats.last_request_body = None
            message = f"malformed JSON: {exc}"
            raise _Refused(dialect.error(400, message, "malformed_json", headers)) from None
        self._board.stats.last_request_body = body
        await self._board.changed()
        if not isinstance(body, dict):
            message = "body must be a JSON object"
            raise _Refused(dialect.error(400, message, "invalid_request", headers))
        player, turn, session = self._player, None, None
        if player is not None and dialect.plan_turn is not None:
            session = session_of(request.headers)
            turn = player.peek(session, number)
        planned = self._plan(dialect, raw, body, headers, turn)
        fault = self._pick_fault(dialect, request.headers.get("x-sim-fault"), headers)
        if player is not None and turn is not None and fault is None:
            # A faulted answer leaves the turn for the agent's retry.
            self._board.stats.script_turns[session or ""] = player.advance(session)
        gate_name = request.headers.get("x-sim-gate")
        gate = self._gate(gate_name) if gate_name else None
        return _Call(dialect, request, number, headers, planned.plan, fault, gate, planned.blocks)

    def _plan(
        self,
        dialect: Dialect,
        raw: bytes,
        body: dict[str, Any],
        headers: dict[str, str],
        turn: ScriptTurn | None,
    ) -> _Planned:
        key = (dialect.name, raw)
        # A scripted answer depends on the session's place in its script, not the body.
        planned = self._plans.get(key) if turn is None else None
        if planned is None:
            config = self._config
            try:
                if turn is not None and dialect.plan_turn is not None:
                    plan = dialect.plan_turn(body, config, turn)
                else:
                    plan = dialect.plan(body, config)
                blocks = None
                if config.counts_prompts and dialect.prompt_tokens is not None and plan.latency:
                    tokens = dialect.prompt_tokens(body, config)
                    size = config.prefix_block_tokens
                    blocks = prompt_blocks(tokens.prompt, size, tokens.generated)
            except BadRequest as exc:
                raise _Refused(dialect.error(400, str(exc), "invalid_request", headers)) from None
            planned = _Planned(plan, blocks)
            if turn is None:
                self._remember(key, planned)
        return planned

    def _remember(self, key: tuple[str, bytes], planned: _Planned) -> None:
        blocks = planned.blocks
        # about 40 bytes per block hash (a tuple slot and an int object)
        size = len(key[1]) + planned.plan.nbytes + (40 * len(blocks.hashes) if blocks else 0)
        if size > _CACHE_BYTES // 16:
            return  # huge bodies or answers: generating again is cheap next to sending them
        if len(self._plans) >= _CACHE_ENTRIES or self._cached_bytes + size > _CACHE_BYTES:
            self._plans.clear()
            self._cached_bytes = 0
        self._plans[key] = planned
        self._cached_bytes += size

    def _pick_fault(
        self, dialect: Dialect, header: str | None, headers: dict[str, str]
    ) -> FaultSpec | None:
        if header is not None:
            try:
                candidates: tuple[FaultSpec, ...] = (parse_fault(header),)
            except ConfigError as exc:
                error = dialect.error(400, exc.message, "invalid_fault", headers)
                raise _Refused(error) from None
        else:
            candidates = self._config.faults
        for fault in candidates:
            # Draw only for partial probabilities so the sequence depends on the seed alone.
            if fault.prob >= 1.0 or self._rng.random() < fault.prob:
                counts = self._board.stats.faults
                counts[fault.kind] = counts.get(fault.kind, 0) + 1
                return fault
        return None

    async def _serve(self, call: _Call) -> None:
        fault = call.fault
        kind = fault.kind if fault else None
        if fault is not None and fault.kind == "status":
            status = int(fault.arg or 500)
            message = f"simulated fault: HTTP {status}"
            call.response = call.dialect.error(status, message, "sim_fault", call.headers)
            await send(call.request, call.response)
            return
        if kind == "reset":
            call.cut = True
            reset_connection(call.request)
            return
        if fault is not None and kind == "stall":
            await asyncio.sleep(fault.arg or 0.0)
        if call.plan.latency:
            first_token_ms = self._config.ttft_ms + self._prefill_ms(call)
            if call.blocks is not None:
                call.headers["x-sim-ttft-ms"] = f"{first_token_ms:g}"
            if first_token_ms > 0:
                await asyncio.sleep(first_token_ms / 1000.0)
        if call.plan.stream:
            await self._stream(call)
        else:
            await self._respond(call)

    def _prefill_ms(self, call: _Call) -> float:
        """The prefill time of the prompt's tokens the cache misses (and cache them); the
        response says how many were cached (``x-sim-cached-tokens``, of
        ``x-sim-prompt-tokens``) and the first-token delay (``x-sim-ttft-ms``)."""
        blocks = call.blocks
        if blocks is None:
            return 0.0
        hit = self.cache.lookup(blocks)
        stats = self._board.stats
        stats.prefix_hit_tokens += hit
        stats.prefix_miss_tokens += blocks.tokens - hit
        call.headers["x-sim-prompt-tokens"] = str(blocks.tokens)
        call.headers["x-sim-cached-tokens"] = str(hit)
        return (blocks.tokens - hit) * self._config.prefill_ms_per_token

    async def _respond(self, call: _Call) -> None:
        fault, plan = call.fault, call.plan
        if call.gate is not None:
            await call.gate.hold()
        if fault is not None and fault.kind == "stall-mid":
            await asyncio.sleep(fault.arg or 0.0)
        if self._config.tokens_per_s > 0 and plan.tokens:
            await asyncio.sleep(plan.tokens / self._config.tokens_per_s)
        if fault is not None and fault.kind == "drop":
            await self._drop_after_headers(call)
            return
        if fault is not None and fault.kind == "malformed":
            body = call.dialect.malformed_body
        else:
            body = plan.body.render(call.dialect.holes(call.number, int(time.time())))
        call.response = web.Response(
            body=body, content_type="application/json", headers=call.headers
        )
        await send(call.request, call.response)

    async def _drop_after_headers(self, call: _Call) -> None:
        body = call.plan.body.render(call.dialect.holes(call.number, int(time.time())))
        response = web.StreamResponse(headers=call.headers)
        response.content_type = "application/json"
        response.content_length = len(body)
        call.response = response
        await response.prepare(call.request)
        self._cut(call)

    @staticmethod
    def _cut(call: _Call) -> None:
        """Close the connection mid-response (bytes already written are flushed first)."""
        call.cut = True
        if call.request.transport is not None:
            call.request.transport.close()

    async def _stream(self, call: _Call) -> None:
        response = web.StreamResponse(headers={**call.headers, **_SSE_HEADERS})
        call.response = response
        await response.prepare(call.request)
        holes = call.dialect.holes(call.number, int(time.time()))
        if call.fault is None and call.gate is None and self._config.tokens_per_s <= 0:
            await response.write(call.plan.joined.render(holes))  # fast path: one write
        elif not await self._stream_events(call, response, holes):
            return
        await response.write_eof()

    async def _stream_events(
        self, call: _Call, response: web.StreamResponse, holes: dict[bytes, bytes]
    ) -> bool:
        """Write the events one by one; ``False`` when a fault ended the stream early."""
        fault, plan = call.fault, call.plan
        kind = fault.kind if fault else None
        loop = asyncio.get_running_loop()
        interval = 1.0 / self._config.tokens_per_s if self._config.tokens_per_s > 0 else 0.0
        first, last = plan.first_token, plan.first_token + plan.token_events
        start = loop.time()
        for i, event in enumerate(plan.events):
            if kind == "drop" and fault is not None and i >= (fault.arg or 0):
                self._cut(call)
                return False
            if interval and first < i < last:
                await asyncio.sleep(max(0.0, start + (i - first) * interval - loop.time()))
            await response.write(event.render(holes))
            if i == 0:
                if kind == "malformed":
                    await response.write(call.dialect.malformed_event)
                    await response.write_eof()
                    return False
                if call.gate is not None:
                    await call.gate.hold()
                if fault is not None and kind == "stall-mid":
                    await asyncio.sleep(fault.arg or 0.0)
            if i == first:
                start = loop.time()  # pacing counts from the first token, after any hold
        return True
