"""Serving a model request on any route: admission, plans, faults and stats.

The :class:`Handler` is dialect-blind: a :class:`~rolltap.sim.plan.Dialect` supplies the
wire bytes (a :class:`~rolltap.sim.plan.Plan` per body) and the error shape; everything
else (``x-sim-fault``, the answer cache, the engine's pause, the counters, and through
:class:`~rolltap.sim.respond.Responder` the time to first token, token pacing, aborts and
``x-sim-gate``) is shared by every route.
"""

from __future__ import annotations

import asyncio
import random
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
from rolltap.sim.respond import Call, Responder
from rolltap.sim.script import ScriptPlayer, ScriptTurn, session_of
from rolltap.sim.stats import Gate, StatsBoard
from rolltap.sim.weights import Generation, Weights
from rolltap.sim.wire import send

__all__ = ["Handler"]

# Bounds on the answer cache: entries, and bytes held by bodies and rendered answers.
_CACHE_ENTRIES = 4096
_CACHE_BYTES = 64 * 1024 * 1024


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

    def __init__(
        self, config: SimConfig, board: StatsBoard, gate: Callable[[str], Gate], weights: Weights
    ) -> None:
        self._config = config
        # The config answers are planned with once a version is set (see plan.versioned).
        self._versioned: SimConfig | None = None
        self._board = board
        self._gate = gate
        self._weights = weights
        self._player = ScriptPlayer(config.script) if config.script is not None else None
        self._rng = random.Random(config.seed)
        # Answers depend only on the route and the body bytes, so repeated bodies skip all
        # generation.
        self._plans: dict[tuple[str, bytes, bool], _Planned] = {}
        #: the prompts' prefix cache (see :mod:`rolltap.sim.prefix`)
        self.cache = PrefixCache(config.prefix_cache_blocks, config.prefix_block_tokens)
        self._responder = Responder(config, board, weights, self.cache)
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
        call: Call | None = None
        generation: Generation | None = None
        try:
            generation = await self._generation(dialect)
            try:
                call = await self._admit(dialect, request, number, headers)
            except _Refused as refused:
                await send(request, refused.response)
                stats.completed += 1
                return refused.response
            await self._responder.serve(call, generation)
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
            if generation is not None:
                self._weights.finish(generation)
            stats.in_flight -= 1
            await self._board.changed()

    async def _generation(self, dialect: Dialect) -> Generation:
        """A generating route's request waits here while the engine is paused; the others
        (count_tokens) are no generation the engine aborts or freezes."""
        if not dialect.generates:
            return Generation(self._weights)
        generation = await self._weights.admit()
        await self._board.changed()
        return generation

    def _count_disconnect(self, call: Call | None) -> None:
        if not self.closing and not (call and call.cut):
            self._board.stats.disconnected += 1

    async def _admit(
        self, dialect: Dialect, request: web.BaseRequest, number: int, headers: dict[str, str]
    ) -> Call:
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
        return Call(dialect, request, number, headers, planned.plan, fault, gate, planned.blocks)

    def _plan(
        self,
        dialect: Dialect,
        raw: bytes,
        body: dict[str, Any],
        headers: dict[str, str],
        turn: ScriptTurn | None,
    ) -> _Planned:
        config = self._planning_config()
        key = (dialect.name, raw, config.policy_version is not None)
        # A scripted answer depends on the session's place in its script, not the body.
        planned = self._plans.get(key) if turn is None else None
        if planned is None:
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

    def _planning_config(self) -> SimConfig:
        """The config to plan with: once the engine has a version, answers report it."""
        if self._weights.version is None or self._config.policy_version is not None:
            return self._config
        if self._versioned is None:
            update = {"policy_version": self._weights.version}
            self._versioned = self._config.model_copy(update=update)
        return self._versioned

    def _remember(self, key: tuple[str, bytes, bool], planned: _Planned) -> None:
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
