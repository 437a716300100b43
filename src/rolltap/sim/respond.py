"""Answering one admitted request: first-token delay, token pacing, gates, faults, aborts.

The :class:`Responder` writes a :class:`Call`'s :class:`~rolltap.sim.plan.Plan` at the
configured pace. Every wait of a generation is its :class:`~rolltap.sim.weights.Generation`'s,
so an abort ends it at once and the answer is the plan's :attr:`~rolltap.sim.plan.Plan.abort`
for what was generated so far: tokens are generated one by one at ``tokens_per_s`` from the
first token on (a stream's token events are written as they are generated), so an abort
after N tokens' time answers exactly those N tokens, a prefix of the uninterrupted answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from rolltap.sim.config import FaultSpec, SimConfig
from rolltap.sim.plan import Dialect, Plan, Template
from rolltap.sim.prefix import PrefixCache, PromptBlocks
from rolltap.sim.stats import Gate, StatsBoard
from rolltap.sim.weights import Generation, Weights
from rolltap.sim.wire import reset_connection, send

__all__ = ["Call", "Responder"]

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
# How writing a stream's events ended: in full, by a fault, or by an abort.
_Outcome = Literal["done", "ended", "aborted"]


@dataclass(slots=True)
class Call:
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
    #: a stream's events written so far
    sent: int = 0
    #: the values of the plan's holes (ids, time), made when the first bytes are
    holes: dict[bytes, bytes] | None = None


class Responder:
    """Writes the answers of one :class:`~rolltap.sim.Simulator`."""

    def __init__(
        self, config: SimConfig, board: StatsBoard, weights: Weights, cache: PrefixCache
    ) -> None:
        self._config = config
        self._board = board
        self._weights = weights
        self._cache = cache

    async def serve(self, call: Call, generation: Generation) -> None:
        """Answer ``call``, which is ``generation``."""
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
        if fault is not None and kind == "stall" and not await generation.idle(fault.arg or 0.0):
            await self._abort(call, 0)
            return
        if call.plan.latency:
            first_token_ms = self._config.ttft_ms + self._prefill_ms(call)
            if call.blocks is not None:
                call.headers["x-sim-ttft-ms"] = f"{first_token_ms:g}"
            first_token = generation.clock() + first_token_ms / 1000.0
            if first_token_ms > 0 and not await generation.until(first_token):
                await self._abort(call, 0)
                return
        if call.plan.stream:
            await self._stream(call, generation)
        else:
            await self._respond(call, generation)

    def _prefill_ms(self, call: Call) -> float:
        """The prefill time of the prompt's tokens the cache misses (and cache them); the
        response says how many were cached (``x-sim-cached-tokens``, of
        ``x-sim-prompt-tokens``) and the first-token delay (``x-sim-ttft-ms``)."""
        blocks = call.blocks
        if blocks is None:
            return 0.0
        hit = self._cache.lookup(blocks)
        stats = self._board.stats
        stats.prefix_hit_tokens += hit
        stats.prefix_miss_tokens += blocks.tokens - hit
        call.headers["x-sim-prompt-tokens"] = str(blocks.tokens)
        call.headers["x-sim-cached-tokens"] = str(hit)
        return (blocks.tokens - hit) * self._config.prefill_ms_per_token

    def _render(self, call: Call, template: Template) -> bytes:
        """``template`` with the call's ids and time, and the weight version now."""
        if call.holes is None:
            call.holes = call.dialect.holes(call.number, int(time.time()))
        call.holes[b"version"] = self._weights.version_json
        return template.render(call.holes)

    async def _respond(self, call: Call, generation: Generation) -> None:
        fault, plan = call.fault, call.plan
        if call.gate is not None and not await generation.hold(call.gate):
            await self._abort(call, 0)
            return
        stall_mid = fault is not None and fault.kind == "stall-mid"
        if fault is not None and stall_mid and not await generation.idle(fault.arg or 0.0):
            await self._abort(call, 0)
            return
        generated = await self._generate(generation, plan.tokens)
        if generated < plan.tokens:
            await self._abort(call, generated)
            return
        if fault is not None and fault.kind == "drop":
            await self._drop_after_headers(call)
            return
        if fault is not None and fault.kind == "malformed":
            body = call.dialect.malformed_body
        else:
            body = self._render(call, plan.body)
        call.response = web.Response(
            body=body, content_type="application/json", headers=call.headers
        )
        await send(call.request, call.response)

    async def _generate(self, generation: Generation, tokens: int) -> int:
        """Generate ``tokens`` tokens at the configured pace; how many were, when aborted."""
        stats, rate = self._board.stats, self._config.tokens_per_s
        if rate <= 0:
            stats.tokens_generated += tokens
            return tokens
        start = generation.clock()
        for i in range(1, tokens + 1):
            if not await generation.until(start + i / rate):
                return i - 1
            stats.tokens_generated += 1
            await self._board.changed()
        return tokens

    async def _abort(self, call: Call, generated: int) -> None:
        """Answer an aborted generation: its plan's abort for the ``generated`` tokens (a
        stream: after the events written, the start of the stream if it had not started)."""
        self._board.stats.aborted += 1
        plan = call.plan
        if not plan.stream:
            answer = plan.abort(generated) if plan.abort is not None else plan
            call.response = web.Response(
                body=self._render(call, answer.body), content_type="application/json",
                headers=call.headers,
            )  # fmt: skip
            await send(call.request, call.response)
            return
        response = call.response or await self._open_stream(call)
        for event in plan.events[call.sent : plan.first_token]:
            await response.write(self._render(call, event))
        sent = max(call.sent, plan.first_token)
        tail = plan.abort(sent).events if plan.abort is not None else plan.events[sent:]
        for event in tail:
            await response.write(self._render(call, event))
        await response.write_eof()

    async def _drop_after_headers(self, call: Call) -> None:
        body = self._render(call, call.plan.body)
        response = web.StreamResponse(headers=call.headers)
        response.content_type = "application/json"
        response.content_length = len(body)
        call.response = response
        await response.prepare(call.request)
        self._cut(call)

    @staticmethod
    def _cut(call: Call) -> None:
        """Close the connection mid-response (bytes already written are flushed first)."""
        call.cut = True
        if call.request.transport is not None:
            call.request.transport.close()

    async def _open_stream(self, call: Call) -> web.StreamResponse:
        response = web.StreamResponse(headers={**call.headers, **_SSE_HEADERS})
        call.response = response
        await response.prepare(call.request)
        return response

    async def _stream(self, call: Call, generation: Generation) -> None:
        response = await self._open_stream(call)
        plan = call.plan
        if call.fault is None and call.gate is None and self._config.tokens_per_s <= 0:
            await response.write(self._render(call, plan.joined))  # fast path: one write
            call.sent = len(plan.events)
            self._board.stats.tokens_generated += plan.token_events
        else:
            outcome = await self._stream_events(call, response, generation)
            if outcome == "ended":
                return
            if outcome == "aborted":
                await self._abort(call, 0)
                return
        await response.write_eof()

    async def _stream_events(
        self, call: Call, response: web.StreamResponse, generation: Generation
    ) -> _Outcome:
        """Write the events one by one, each token event when it is generated."""
        fault, plan, board = call.fault, call.plan, self._board
        kind = fault.kind if fault else None
        interval = 1.0 / self._config.tokens_per_s if self._config.tokens_per_s > 0 else 0.0
        first, last = plan.first_token, plan.first_token + plan.token_events
        start = generation.clock()
        for i, event in enumerate(plan.events):
            if kind == "drop" and fault is not None and i >= (fault.arg or 0):
                self._cut(call)
                return "ended"
            paced = interval and first < i < last
            if paced and not await generation.until(start + (i - first) * interval):
                return "aborted"
            await response.write(self._render(call, event))
            call.sent = i + 1
            if first <= i < last:
                board.stats.tokens_generated += 1
                await board.changed()
            if i == 0:
                if kind == "malformed":
                    await response.write(call.dialect.malformed_event)
                    await response.write_eof()
                    return "ended"
                if call.gate is not None and not await generation.hold(call.gate):
                    return "aborted"
                stall = fault is not None and kind == "stall-mid"
                if stall and fault is not None and not await generation.idle(fault.arg or 0.0):
                    return "aborted"
            if i == first:
                start = generation.clock()  # pacing counts from the first token, after any hold
        return "done"
