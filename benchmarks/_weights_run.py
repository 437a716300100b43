"""One run of the weight-update benchmark: a simulator, a gateway, the harness loops, the trainer.

The simulator runs in its own process (``rolltap sim``, paced), fresh per run so that its
counters start at 0; the gateway (in-process :class:`~rolltap.Gateway`), the harness loops
(the real OpenAI SDK) and the trainer share this process's event loop. See weights.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import openai
from _procs import free_port, running

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway

__all__ = ["MODES", "Profile", "Run", "run_once"]

#: ``none``: no updates (the baseline); then the three ways to update the weights
MODES = ("none", "stop", "hold", "abort")


@dataclass(frozen=True, slots=True)
class Profile:
    """The loop's shape: answers, decode rate, update cadence and the run's length."""

    answer_tokens: int
    tokens_per_s: float
    ttft_ms: float
    every_s: float
    load_s: float
    run_s: float
    rollouts: int
    turns: int

    @property
    def max_tokens(self) -> int:
        return 2 * self.answer_tokens + 16


@dataclass
class Run:
    """What one run measured (times: ``time.perf_counter``)."""

    mode: str
    #: the trainer's pause → resume windows, one per update
    windows: list[tuple[float, float]] = field(default_factory=list)
    #: per harness call (its reruns included): start, end, completion tokens kept
    calls: list[tuple[float, float, int]] = field(default_factory=list)
    #: what the harness saw go wrong (an exception, or an answer the engine aborted)
    errors: list[str] = field(default_factory=list)
    #: completion tokens of the answers the harness kept, and of those it threw away
    kept: int = 0
    discarded: int = 0
    rollouts: int = 0
    wall_s: float = 0.0
    sim: dict[str, Any] = field(default_factory=dict)


def _endpoint(mode: str, base_url: str, tokenizer: Path) -> EndpointConfig:
    if mode == "stop":  # today: a relay (chat), the harness sees the engine's aborts
        return EndpointConfig(base_url=base_url, model="sim")
    return EndpointConfig(
        base_url=base_url, model="sim", client="tokens", tokenizer=str(tokenizer),
        completions_api="sglang", forward_pause="sglang" if mode == "abort" else None,
    )  # fmt: skip


async def _call(client: openai.AsyncOpenAI, messages: list[Any], prof: Profile, run: Run) -> str:
    """One harness call, rerun until the harness gets a whole answer (today's only way)."""
    t0 = time.perf_counter()
    for _ in range(32):
        try:
            reply = await client.chat.completions.create(
                model="sim", messages=messages, max_tokens=prof.max_tokens
            )
        except openai.APIError as exc:
            run.errors.append(type(exc).__name__)
            continue
        choice, usage = reply.choices[0], reply.usage
        tokens = usage.completion_tokens if usage is not None else 0
        if choice.finish_reason not in ("stop", "length"):  # the engine aborted it
            run.errors.append(f"finish_reason {choice.finish_reason}")
            run.discarded += tokens
            continue
        run.kept += tokens
        run.calls.append((t0, time.perf_counter(), tokens))
        return choice.message.content or ""
    raise RuntimeError("a call failed 32 times in a row")


async def _harness(i: int, gateway: Gateway, prof: Profile, end: float, run: Run) -> None:
    """Rollouts back to back until ``end``: register, ``turns`` calls, unregister."""
    async with openai.DefaultAsyncHttpxClient(timeout=600) as http:
        n = 0
        while time.perf_counter() < end:
            rollout = await gateway.register()
            info = gateway.describe(rollout)
            client = openai.AsyncOpenAI(
                base_url=info["openai_base_url"], api_key=info["api_key"], max_retries=0,
                http_client=http,
            )  # fmt: skip
            messages: list[Any] = [{"role": "user", "content": f"rollout {i}.{n}: question 0"}]
            for turn in range(prof.turns):
                text = await _call(client, messages, prof, run)
                messages += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"question {turn + 1}"},
                ]
            await gateway.unregister(rollout.id)
            run.rollouts += 1
            n += 1


Update = Callable[[str], Awaitable[None]]


def _updates(mode: str, gateway: Gateway, http: aiohttp.ClientSession, sim: str, load_s: float
             ) -> Update:  # fmt: skip
    """The trainer's update to version ``v``, as ``mode`` makes it."""

    async def post(path: str, body: dict[str, Any]) -> None:
        async with http.post(sim + path, json=body) as resp:
            resp.raise_for_status()

    async def engine_version(version: str, abort: bool) -> None:
        await post("/update_weight_version", {"new_version": version, "abort_all_requests": abort})

    async def stop(version: str) -> None:  # the engine alone; rolltap knows nothing
        await post("/pause_generation", {"mode": "abort"})
        await asyncio.sleep(load_s)
        await engine_version(version, True)
        await post("/continue_generation", {})

    async def gated(version: str) -> None:  # hold, or abort (forwarded to the engine)
        await gateway.pause("hold" if mode == "hold" else "abort")
        await asyncio.sleep(load_s)
        await engine_version(version, False)
        await gateway.set_policy_version(version)
        await gateway.resume()

    return stop if mode == "stop" else gated


async def _trainer(update: Update, prof: Profile, start: float, end: float, run: Run) -> None:
    """An update every ``every_s`` while the run lasts; each window timed pause → resume."""
    k = 0
    while (at := start + (k + 1) * prof.every_s) + prof.load_s < end:
        await asyncio.sleep(max(at - time.perf_counter(), 0))
        k += 1
        t0 = time.perf_counter()
        await update(f"v{k}")
        run.windows.append((t0, time.perf_counter()))


async def _stats(http: aiohttp.ClientSession, sim: str) -> dict[str, Any]:
    async with http.get(sim + "/stats") as resp:
        data: dict[str, Any] = await resp.json()
        return data


async def _measure(mode: str, sim: str, tokenizer: Path, prof: Profile) -> Run:
    run = Run(mode)
    settings = GatewaySettings(admin_token="bench")
    async with Gateway(_endpoint(mode, sim + "/v1", tokenizer), settings) as gateway, \
            aiohttp.ClientSession() as http:  # fmt: skip
        await gateway.ready()  # the first renderer built (transformers imported) first
        await gateway.set_policy_version("v0")
        update = _updates(mode, gateway, http, sim, prof.load_s)
        start = time.perf_counter()
        end = start + prof.run_s
        async with asyncio.TaskGroup() as tasks:
            for i in range(prof.rollouts):
                tasks.create_task(_harness(i, gateway, prof, end, run))
            if mode != "none":
                tasks.create_task(_trainer(update, prof, start, end, run))
        run.wall_s = time.perf_counter() - start
        run.sim = await _stats(http, sim)
    return run


def run_once(mode: str, tokenizer: Path, prof: Profile) -> Run:
    """One run of ``mode`` against a fresh simulator process."""
    port = free_port()
    command = [
        sys.executable, "-c", "from rolltap.cli.main import main; main()", "sim",
        "--port", str(port), "--model", "sim", "--seed", "1", "--policy-version", "v0",
        "--ttft-ms", str(prof.ttft_ms), "--tokens-per-s", str(prof.tokens_per_s),
        "--completion-tokens", str(prof.answer_tokens),
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with running(command, url + "/health"):
        return asyncio.run(_measure(mode, url, tokenizer, prof))
