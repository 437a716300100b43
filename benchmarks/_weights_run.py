"""One run of the weight-update benchmark: a simulator, ``rolltap serve``, the trainer.

The simulator (``rolltap sim``, paced) and the service (``rolltap serve``, two workers, a
SQLite store) run in their own processes, fresh per run so that their counters start at 0;
the rollouts' harness (``_weights_harness.loop``) runs in the service's workers, the
trainer and the callers that keep ``rollouts`` rollouts in flight in this process, through
:class:`~rolltap.serve.ServeClient` as a trainer would. See weights.py.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from _procs import free_port, running
from _weights_harness import KIND

from rolltap.serve import RolloutSpec, ServeClient
from rolltap.store import Store

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
    """What one run measured (times: ``time.time``, the harness's in the workers too)."""

    mode: str
    #: the trainer's pause → resume windows, one per update
    windows: list[tuple[float, float]] = field(default_factory=list)
    #: per harness call (its reruns included): start, end, completion tokens kept
    calls: list[tuple[float, float, int]] = field(default_factory=list)
    #: per harness call, where the rollout made no other: its ``model_response`` event's
    #: ``timing`` (what the gateway saw: ``waited_ms``, ``gateway_ms``, ``upstream_ms``)
    timings: list[dict[str, float] | None] = field(default_factory=list)
    #: what the harness saw go wrong (an exception, or an answer the engine aborted)
    errors: list[str] = field(default_factory=list)
    #: completion tokens of the answers the harness threw away
    discarded: int = 0
    #: every rollout's session (its harness's ``bench_calls`` event is in the store)
    sessions: list[str] = field(default_factory=list)
    rollouts: int = 0
    wall_s: float = 0.0
    sim: dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """Completion tokens of the answers the harness kept."""
        return sum(n for _, _, n in self.calls)


TOKEN = "bench-serve"
WORKERS = 2
_HERE = Path(__file__).resolve().parent


def _config(mode: str, sim: str, tokenizer: Path, port: int, db: Path, prof: Profile) -> str:
    """The service's TOML: a relay for ``stop`` (the harness sees the engine's aborts),
    else the token client (``abort``: the pause forwarded to the engine)."""
    endpoint = [f'base_url = "{sim}/v1"', 'model = "sim"']
    if mode != "stop":
        endpoint += ['client = "tokens"', f'tokenizer = "{tokenizer}"',
                     'completions_api = "sglang"']  # fmt: skip
    if mode == "abort":
        endpoint.append('forward_pause = "sglang"')
    return "\n".join([
        "[serve]", f"workers = {WORKERS}", f"port = {port}", f'token = "{TOKEN}"',
        f'store = "sqlite:///{db}"', f"max_inflight = {prof.rollouts}",
        "[endpoints.sim]", *endpoint, "",
    ])  # fmt: skip


def _spec(name: str, turns: int, max_tokens: int) -> RolloutSpec:
    task = {"id": name, "prompt": f"rollout {name}: question 0",
            "info": {"turns": turns, "max_tokens": max_tokens}}  # fmt: skip
    return RolloutSpec(task=task, harness="_weights_harness:loop")


async def _warm(serve: ServeClient, prof: Profile) -> None:
    """A short rollout per caller before the clock starts: a fresh service's first calls
    build its token renderers and open its connections, which no update costs."""
    async with asyncio.TaskGroup() as tasks:
        for i in range(prof.rollouts):
            tasks.create_task(serve.submit(_spec(f"warm{i}", 1, 8)))


async def _caller(i: int, serve: ServeClient, prof: Profile, end: float, run: Run) -> None:
    """Rollouts back to back until ``end``, as a trainer's rollout loop submits them.

    Caller ``i`` begins ``i / rollouts`` of an answer's decode time after the first, so
    that the callers' calls end and begin spread over the run as real rollouts' do (all
    beginning at once, equal answers would keep them in step: every update would find
    every call in flight and none beginning)."""
    await asyncio.sleep(i / prof.rollouts * prof.answer_tokens / prof.tokens_per_s)
    n = 0
    while time.time() < end:
        result = await serve.submit(_spec(f"r{i}.{n}", prof.turns, prof.max_tokens))
        run.sessions.append(result.id)
        if result.status == "completed":
            run.rollouts += 1
        else:
            run.errors.append(f"rollout {result.status}: {result.error_code}")
        n += 1


Update = Callable[[str], Awaitable[None]]


def _updates(mode: str, serve: ServeClient, http: aiohttp.ClientSession, sim: str, load_s: float
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
        await serve.pause("hold" if mode == "hold" else "abort")
        await asyncio.sleep(load_s)
        await engine_version(version, False)
        await serve.set_policy_version(version)
        await serve.resume()

    return stop if mode == "stop" else gated


async def _trainer(update: Update, prof: Profile, start: float, end: float, run: Run) -> None:
    """An update every ``every_s`` while the run lasts; each window timed pause → resume."""
    k = 0
    while (at := start + (k + 1) * prof.every_s) + prof.load_s < end:
        await asyncio.sleep(max(at - time.time(), 0))
        k += 1
        t0 = time.time()
        await update(f"v{k}")
        run.windows.append((t0, time.time()))


async def _stats(http: aiohttp.ClientSession, sim: str) -> dict[str, Any]:
    async with http.get(sim + "/stats") as resp:
        data: dict[str, Any] = await resp.json()
        return data


async def _measure(mode: str, sim: str, serve_url: str, prof: Profile) -> Run:
    run = Run(mode)
    async with ServeClient(serve_url, TOKEN) as serve, aiohttp.ClientSession() as http:
        await serve.set_policy_version("v0")
        await _warm(serve, prof)
        before = await _stats(http, sim)
        update = _updates(mode, serve, http, sim, prof.load_s)
        start = time.time()
        end = start + prof.run_s
        async with asyncio.TaskGroup() as tasks:
            for i in range(prof.rollouts):
                tasks.create_task(_caller(i, serve, prof, end, run))
            if mode != "none":
                tasks.create_task(_trainer(update, prof, start, end, run))
        run.wall_s = time.time() - start
        after = await _stats(http, sim)
        run.sim = {key: after[key] - before[key] for key in ("tokens_generated", "aborted")}
    return run


async def _read(run: Run, db: Path) -> None:
    """What the harnesses saw, from the store the service wrote."""
    async with await Store.open(f"sqlite:///{db}") as store:
        for session in run.sessions:
            events = await store.events(session)
            timings = [e.payload["timing"] for e in events if e.kind == "model_response"]
            for event in events:
                if event.kind != KIND:
                    continue
                seen = event.payload
                calls = [(a, b, n) for a, b, n in seen["calls"]]
                run.calls += calls
                # a call rerun (``stop``) made more model calls than the harness kept
                run.timings += timings if len(timings) == len(calls) else [None] * len(calls)
                run.errors += seen["errors"]
                run.discarded += seen["discarded"]


def _rolltap(*args: str) -> list[str]:
    return [sys.executable, "-c", "from rolltap.cli.main import main; main()", *args]


def run_once(mode: str, tokenizer: Path, prof: Profile, folder: Path) -> Run:
    """One run of ``mode`` against a fresh simulator and a fresh service (its store in
    ``folder``)."""
    sim_port, serve_port = free_port(), free_port()
    sim = _rolltap(
        "sim", "--port", str(sim_port), "--model", "sim", "--seed", "1", "--policy-version",
        "v0", "--ttft-ms", str(prof.ttft_ms), "--tokens-per-s", str(prof.tokens_per_s),
        "--completion-tokens", str(prof.answer_tokens),
    )  # fmt: skip
    sim_url, serve_url = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{serve_port}"
    db = folder / f"{mode}-{time.time_ns()}.db"
    config = folder / "serve.toml"
    config.write_text(_config(mode, sim_url, tokenizer, serve_port, db, prof))
    # the workers import the harness from here
    path = os.pathsep.join(filter(None, [str(_HERE), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    with (
        running(sim, sim_url + "/health"),
        running(_rolltap("serve", "--config", str(config)), serve_url + "/health", env=env),
    ):
        run = asyncio.run(_measure(mode, sim_url, serve_url, prof))
    asyncio.run(_read(run, db))
    return run
