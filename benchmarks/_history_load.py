"""Agent-shaped load for gateway_overhead.py: histories that grow, three targets.

Every measurement runs against direct (the simulator), a bare relay (_bare_relay.py)
and rolltap in the same run, calls interleaved one by one at c = 1 and, at 64 rollouts,
the targets taking turns a slice of turns at a time (:class:`GrowingLoad`), so drift on
this shared machine lands on all of them alike.

A history is a system prompt and a user task, then turns of an assistant message (text
and a tool call) and a tool result of ~250 bytes each: 400 messages are ~100 KB.

Every body names its target (``user``), so no two targets ever send the simulator the
same bytes: its answer cache is keyed by the body's bytes, and without the tag the
relay (which forwards the load generator's bytes unchanged) would be served from the
direct call's cache entry while rolltap's rewritten body (its model name) never is, a
~0.3 ms head start per call at 400 messages that no real upstream gives.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

__all__ = ["GrowingLoad", "History", "Target", "c1_latencies", "history", "taking_turns"]

_FILLER = "The tool returned rows of observations that the agent keeps in its context. "


@dataclass(frozen=True)
class Target:
    name: str
    url: str  # .../v1
    key: str
    #: the rollout's id on a rolltap gateway (None: a bare relay, or direct)
    rollout: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}


def _turn(i: int, tag: str) -> list[dict[str, Any]]:
    call_id = f"call_{tag}_{i:06d}"
    return [
        {"role": "assistant", "content": f"Step {i}: looking it up.", "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "search", "arguments": orjson.dumps({"q": f"q{i}"}).decode()}},
        ]},
        {"role": "tool", "tool_call_id": call_id, "content": f"{tag} {i:06d} " + _FILLER * 2},
    ]  # fmt: skip


def history(n: int, tag: str = "h") -> list[dict[str, Any]]:
    """``n`` messages (n even, >= 2) of an agent's history."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent. Use the tools."},
        {"role": "user", "content": f"Task {tag}: find the answer."},
    ]
    for i in range((n - 2) // 2):
        out.extend(_turn(i, tag))
    return out


def body(messages: list[dict[str, Any]], target: Target, *, stream: bool) -> bytes:
    req: dict[str, Any] = {
        "model": "m",
        "messages": messages,
        "max_tokens": 16,
        "user": target.name,
    }
    if stream:
        req["stream"] = True
    return orjson.dumps(req)


async def call(http: aiohttp.ClientSession, t: Target, data: bytes) -> tuple[float, float]:
    """(seconds to the first body bytes, seconds to the end) of one call."""
    start = time.perf_counter()
    async with http.post(t.url + "/chat/completions", data=data, headers=t.headers) as resp:
        await resp.content.readany()
        first = time.perf_counter() - start
        await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{t.name}: HTTP {resp.status}")
    return first, time.perf_counter() - start


@dataclass
class History:
    """c = 1 samples (seconds) at one history length, per target."""

    messages: int
    kbytes: float
    total: dict[str, list[float]] = field(default_factory=dict)
    first: dict[str, list[float]] = field(default_factory=dict)
    #: CPU ms per call of the processes measured (filled in by the caller)
    cpu_ms: dict[str, float] = field(default_factory=dict)
    #: calls each target took (warm-up included)
    calls: int = 0

    def p50(self, name: str, *, stream: bool = False) -> float:
        return statistics.median((self.first if stream else self.total)[name]) * 1000.0


async def c1_latencies(
    http: aiohttp.ClientSession, targets: list[Target], n: int, samples: int
) -> History:
    """Each sample sends the same ``n - 2`` messages and two new ones (a new turn); the
    targets take turns call by call, who goes first rotating. Streams give time to
    first chunk."""
    base = history(n - 2 if n > 2 else 2)
    for t in targets:  # rolltap has seen the history once, as a rollout would have
        await call(http, t, body(base, t, stream=False))
    res = History(n, len(body(base, targets[0], stream=False)) / 1000.0)
    res.calls = 1 + samples + samples // 2
    for t in targets:
        res.total[t.name], res.first[t.name] = [], []
    for i in range(samples + samples // 2):
        stream = i >= samples
        messages = base + _turn(100_000 + i, "new") if n > 2 else history(2, f"s{i:06d}")
        for k in range(len(targets)):
            t = targets[(i + k) % len(targets)]
            first, total = await call(http, t, body(messages, t, stream=stream))
            if i >= 20 and i != samples:  # the first calls of each kind warm up
                (res.first if stream else res.total)[t.name].append(first if stream else total)
    return res


class GrowingLoad:
    """``rollouts`` (one target each) whose histories grow turn by turn, run at once a
    slice of turns at a time (:meth:`advance`), so that several targets' loads can take
    turns with each other; the seconds and calls of every slice add up."""

    def __init__(self, rollouts: list[Target], *, stream: bool) -> None:
        self.rollouts, self.stream = rollouts, stream
        self.histories = [history(2, f"r{r}") for r in range(len(rollouts))]
        self.turns = 0
        self.seconds = 0.0

    @property
    def calls(self) -> int:
        return len(self.rollouts) * self.turns

    @property
    def rate(self) -> float:
        """Calls per second over every slice so far."""
        return self.calls / self.seconds

    async def advance(self, http: aiohttp.ClientSession, turns: int) -> None:
        """``turns`` more turns of every rollout, all at once."""
        first = self.turns

        async def rollout(r: int) -> None:
            t, messages = self.rollouts[r], self.histories[r]
            for i in range(first, first + turns):
                await call(http, t, body(messages, t, stream=self.stream))
                messages.extend(_turn(i, f"r{r}"))

        start = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            for r in range(len(self.rollouts)):
                tg.create_task(rollout(r))
        self.seconds += time.perf_counter() - start
        self.turns += turns


def taking_turns(names: Sequence[str], turns: int, slices: int) -> Iterator[tuple[str, int]]:
    """Each target's turn as ``(name, turns of it)``: ``slices`` rounds in which every
    target runs its share of ``turns`` (spread evenly), who goes first rotating."""
    for k in range(slices):
        size = turns // slices + (k < turns % slices)
        first = k % len(names)
        for name in [*names[first:], *names[:first]]:
            yield name, size
