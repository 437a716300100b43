"""The dialect matrix of gateway_overhead.py: every harness × upstream dialect pair.

Each pair is measured against the simulator called directly in the harness's dialect,
with the same prebuilt body bytes, so the client's own cost cancels. Calls alternate
direct / gateway one by one, and the pairs take turns in blocks, so drift on this shared
machine lands on both sides alike. The gateway's CPU is read around each block: only the
gateway calls of that block touch that gateway process.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import psutil
from _procs import cpu_seconds

from rolltap.dialects.canonical import (
    Message,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.dialects.registry import get_dialect
from rolltap.dialects.sse import SSESplitter

__all__ = ["DIALECTS", "STREAM_TOKENS", "Matrix", "PairResult", "run_matrix"]

DIALECTS = ("chat", "messages", "responses")
#: long streams, so the per-call cost (request, recording) is small per chunk
STREAM_TOKENS = 256

_WEATHER = Tool(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
#: an agent turn (system, tools, a tool call and its result), so translation has real
#: work to do; the simulator answers it with a tool call
_TURN = Request(
    messages=(
        Message("user", (Text("Find the weather in Paris and summarise it."),)),
        Message(
            "assistant",
            (Text("Let me look that up."), ToolCall("call_1", "get_weather", '{"city": "Paris"}')),
        ),
        Message("tool", (ToolResult("call_1", (Text("18 C, light rain, wind 12 km/h"),)),)),
        Message("user", (Text("Thanks. Now the same for Rome."),)),
    ),
    model="bench",
    system=(Text("You are a careful assistant. Use tools when they help."),),
    tools=(_WEATHER,),
    max_tokens=16,
)
#: the same turn streamed, forced to text so the answer is STREAM_TOKENS chunks long
_STREAM_TURN = dataclasses.replace(
    _TURN, max_tokens=STREAM_TOKENS, stream=True, tool_choice=ToolChoice("none")
)


def _bodies(request: Request) -> dict[str, bytes]:
    """``request`` in each dialect's own wire shape, serialized once."""
    return {d: orjson.dumps(get_dialect(d).from_canonical(request)) for d in DIALECTS}


@dataclass(frozen=True)
class Target:
    url: str
    headers: dict[str, str]


@dataclass
class PairResult:
    """Samples (seconds) and gateway CPU for one harness → upstream pair."""

    harness: str
    upstream: str
    chunks: int  # SSE events in the upstream's stream
    direct_call: list[float] = field(default_factory=list)
    gateway_call: list[float] = field(default_factory=list)
    direct_stream: list[float] = field(default_factory=list)
    gateway_stream: list[float] = field(default_factory=list)
    cpu_call: float = 0.0  # gateway CPU seconds over all gateway_call samples
    cpu_stream: float = 0.0

    @property
    def passthrough(self) -> bool:
        return self.harness == self.upstream


@dataclass(frozen=True)
class Matrix:
    rounds: int  # each pair gets one block of each kind per round
    block: int  # non-streaming call pairs per block
    stream_block: int  # stream pairs per block


async def timed(http: aiohttp.ClientSession, t: Target, body: bytes) -> tuple[float, bytes]:
    """Seconds from sending ``body`` to the end of the answer, and the answer."""
    start = time.perf_counter()
    async with http.post(t.url, data=body, headers=t.headers) as resp:
        raw = await resp.read()
        elapsed = time.perf_counter() - start
    if resp.status != 200:
        raise RuntimeError(f"{t.url}: HTTP {resp.status}: {raw[:300]!r}")
    return elapsed, raw


def _target(base: str, dialect: str, key: str) -> Target:
    """``base`` is a server root (no /v1): the simulator's, or a rollout's Anthropic URL."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return Target(base + get_dialect(dialect).path, headers)


async def _rollout(http: aiohttp.ClientSession, admin: str) -> tuple[str, str]:
    async with http.post(admin + "/rollouts", headers={"Authorization": "Bearer bench"}) as resp:
        data: dict[str, Any] = await resp.json()
    return data["anthropic_base_url"], data["api_key"]


async def _block(
    http: aiohttp.ClientSession, direct: Target, gateway: Target, body: bytes, n: int,
    proc: psutil.Process, into_direct: list[float], into_gateway: list[float],
) -> float:  # fmt: skip
    """``n`` direct and ``n`` gateway calls, alternating; the gateway's CPU seconds."""
    cpu0 = cpu_seconds(proc)
    for i in range(n):
        # who goes first alternates, so neither side always meets a just-woken server
        if i % 2:
            into_gateway.append((await timed(http, gateway, body))[0])
            into_direct.append((await timed(http, direct, body))[0])
        else:
            into_direct.append((await timed(http, direct, body))[0])
            into_gateway.append((await timed(http, gateway, body))[0])
    return cpu_seconds(proc) - cpu0


async def run_matrix(
    http: aiohttp.ClientSession,
    sim_url: str,
    gateways: dict[str, tuple[str, psutil.Process]],
    plan: Matrix,
) -> list[PairResult]:
    """Measure all pairs; ``gateways`` maps each upstream dialect to (admin URL, process)."""
    calls, streams = _bodies(_TURN), _bodies(_STREAM_TURN)
    direct = {d: _target(sim_url, d, "k") for d in DIALECTS}
    chunks = {}
    for d in DIALECTS:
        _, raw = await timed(http, direct[d], streams[d])
        chunks[d] = len(SSESplitter().feed(raw))
    pairs: list[tuple[PairResult, Target, psutil.Process]] = []
    for h in DIALECTS:
        for up in DIALECTS:
            admin, proc = gateways[up]
            base, key = await _rollout(http, admin)
            pairs.append((PairResult(h, up, chunks[up]), _target(base, h, key), proc))
    for res, gw, proc in pairs:  # warm: connections, the simulator's answer cache, code
        h = res.harness
        await _block(http, direct[h], gw, calls[h], 20, proc, [], [])
        await _block(http, direct[h], gw, streams[h], 4, proc, [], [])
    for r in range(plan.rounds):
        # each round starts at a different pair, so no pair always follows the same one
        for res, gw, proc in pairs[r % len(pairs) :] + pairs[: r % len(pairs)]:
            h = res.harness
            res.cpu_call += await _block(
                http, direct[h], gw, calls[h], plan.block, proc,
                res.direct_call, res.gateway_call,
            )  # fmt: skip
            res.cpu_stream += await _block(
                http, direct[h], gw, streams[h], plan.stream_block, proc,
                res.direct_stream, res.gateway_stream,
            )  # fmt: skip
    return [res for res, _, _ in pairs]
