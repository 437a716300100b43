"""The replica benchmark's load: agent conversations with a growing history, routers that
send each turn somewhere, and a round-robin proxy for the gateway baseline.

A rollout is ``turns`` chat calls. Every call holds the whole history: a system prompt
shared by all rollouts, then per turn a user message (an "observation" of about 60
tokens, different per rollout and turn) and the simulator's streamed answer. The
simulators share a seed, so a conversation gets the same answers on any replica and the
run's working set is the same whatever the routing.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web

from rolltap.clients.replicas import ReplicaSet, routing_headers
from rolltap.sim import SimConfig
from rolltap.sim.chat import prompt_for
from rolltap.sim.content import answer_for
from rolltap.sim.prefix import conversation_tokens, prompt_blocks
from rolltap.sim.words import WORDS

__all__ = [
    "SYSTEM",
    "Call",
    "DirectPinned",
    "DirectRoundRobin",
    "GatewayRouter",
    "Router",
    "quantile",
    "round_robin_proxy",
    "run_rollouts",
    "working_set_blocks",
]

_WORDS = list(WORDS)
SYSTEM = "You are an agent. Think before you act. " + " ".join(_WORDS[:240])
#: headers that name the rollout to an external router (and to the simulators' stats)
_ROUTING = ("x-rolltap-rollout", "x-session-id", "x-smg-routing-key")


def observation(rollout: int, turn: int) -> str:
    """The user message of ``rollout``'s ``turn`` (deterministic)."""
    rng = random.Random(rollout * 1000 + turn)
    return f"step {turn} of task {rollout}: " + " ".join(rng.choices(_WORDS, k=56))


@dataclass(frozen=True, slots=True)
class Call:
    """One turn as measured by the harness."""

    rollout: int
    turn: int
    #: seconds from sending to the first SSE event
    ttft_s: float
    #: the replica's own first-token delay (its x-sim-ttft-ms), when the answer says
    modeled_s: float | None
    #: where it went, when the harness knows (direct routers)
    replica: str = ""


class Router(Protocol):
    """Where a rollout's next call goes: the URL to post to and its headers."""

    def send(
        self, rollout: int
    ) -> AbstractAsyncContextManager[tuple[str, dict[str, str], str]]: ...


def _rollout_headers(rollout: int) -> dict[str, str]:
    return routing_headers(f"rollout-{rollout}")


@dataclass
class DirectPinned:
    """Client-side pinning with rolltap's own :class:`ReplicaSet` (as the gateway will)."""

    replicas: ReplicaSet

    @asynccontextmanager
    async def send(self, rollout: int) -> AsyncIterator[tuple[str, dict[str, str], str]]:
        async with self.replicas.call(f"rollout-{rollout}") as call:
            url = call.replica + "/chat/completions"
            yield url, _rollout_headers(rollout), call.replica


@dataclass
class DirectRoundRobin:
    """Each call to the next replica, whatever its rollout (a router without affinity)."""

    urls: Sequence[str]
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    @asynccontextmanager
    async def send(self, rollout: int) -> AsyncIterator[tuple[str, dict[str, str], str]]:
        url = self.urls[next(self._turn) % len(self.urls)]
        yield url + "/chat/completions", _rollout_headers(rollout), url


@dataclass
class GatewayRouter:
    """Each rollout posts to its own gateway base URL with its secret."""

    targets: dict[int, tuple[str, str]]  # rollout -> (openai_base_url, api key)

    @asynccontextmanager
    async def send(self, rollout: int) -> AsyncIterator[tuple[str, dict[str, str], str]]:
        base, key = self.targets[rollout]
        yield base + "/chat/completions", {"Authorization": f"Bearer {key}"}, ""


async def _stream_turn(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], body: bytes
) -> tuple[float, float | None, str]:
    """Post a streamed chat call: (seconds to the first event, the replica's modeled
    seconds to first token if it says, the answer's text)."""
    start = time.perf_counter()
    ttft: float | None = None
    text: list[str] = []
    async with http.post(url, data=body, headers=headers) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {(await resp.read())[:200]!r}")
        modeled = resp.headers.get("x-sim-ttft-ms")
        async for line in resp.content:
            if not line.startswith(b"data: "):
                continue
            ttft = time.perf_counter() - start if ttft is None else ttft
            data = line[6:].strip()
            if data == b"[DONE]":
                continue
            choices = orjson.loads(data).get("choices") or [{}]
            text.append(choices[0].get("delta", {}).get("content") or "")
    if ttft is None:
        ttft = time.perf_counter() - start
    return ttft, None if modeled is None else float(modeled) / 1e3, "".join(text)


async def _rollout(
    http: aiohttp.ClientSession, router: Router, rollout: int, turns: int, out: list[Call]
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        messages.append({"role": "user", "content": observation(rollout, turn)})
        body = orjson.dumps({"model": "sim-model", "messages": messages, "stream": True})
        async with router.send(rollout) as (url, headers, replica):
            headers = {**headers, "Content-Type": "application/json"}
            ttft, modeled, text = await _stream_turn(http, url, headers, body)
        out.append(Call(rollout, turn, ttft, modeled, replica))
        messages.append({"role": "assistant", "content": text})
    return messages


async def run_rollouts(
    router: Router, rollouts: int, turns: int, concurrency: int
) -> tuple[list[Call], list[list[dict[str, Any]]], float]:
    """Every rollout to the end, ``concurrency`` at once: (calls, final histories, wall s)."""
    calls: list[Call] = []
    histories: list[list[dict[str, Any]]] = [[] for _ in range(rollouts)]
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int, http: aiohttp.ClientSession) -> None:
        async with slots:
            histories[i] = await _rollout(http, router, i, turns, calls)

    start = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http, asyncio.TaskGroup() as tasks:
        for i in range(rollouts):
            tasks.create_task(one(i, http))
    return calls, histories, time.perf_counter() - start


def working_set_blocks(
    histories: list[list[dict[str, Any]]], block_tokens: int, config: SimConfig
) -> int:
    """Distinct blocks the run's calls fill: those of each rollout's last prompt and answer
    (every earlier call of a rollout is a prefix of them), shared blocks counted once."""
    blocks: set[int] = set()
    for messages in histories:
        prompt = prompt_for({"messages": messages[:-1]}, config)
        tokens = conversation_tokens(prompt, answer_for(prompt, config))
        blocks.update(prompt_blocks(tokens.prompt, block_tokens, tokens.generated).hashes)
    return len(blocks)


@asynccontextmanager
async def round_robin_proxy(urls: Sequence[str]) -> AsyncIterator[str]:
    """An HTTP proxy on a free port sending each request to the next of ``urls`` (server
    roots), streaming the answer back; yields its root URL. The gateway's baseline: a
    router in front of the replicas with no session affinity."""
    turn = itertools.count()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def forward(request: web.BaseRequest) -> web.StreamResponse:
            target = urls[next(turn) % len(urls)] + request.path_qs
            keep = {"content-type", "authorization", *_ROUTING}
            headers = {k: v for k, v in request.headers.items() if k.lower() in keep}
            async with http.post(target, data=await request.read(), headers=headers) as up:
                # the replica's own x-sim-* headers (its modeled TTFT) pass, like the gateway's
                passed = {k: v for k, v in up.headers.items() if k.lower().startswith("x-sim-")}
                passed["Content-Type"] = up.headers.get("Content-Type", "application/json")
                resp = web.StreamResponse(status=up.status, headers=passed)
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp

        runner = web.ServerRunner(web.Server(forward), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            yield f"http://127.0.0.1:{runner.addresses[0][1]}"
        finally:
            await runner.cleanup()


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
