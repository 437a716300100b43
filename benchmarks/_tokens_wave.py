"""One wave of the token benchmark, run in its own process so its peak RSS is its own.

``C`` two-turn rollouts of the built-in ``chat`` harness (OpenAI SDK), ``r = c = C``,
through a gateway with a token endpoint (``client="tokens"``, ``completions_api="vllm"``),
put together as ``rolltap.evaluate`` does (a store, a ``StoreRecorder``, a
``Gateway``, a ``Runner``), with one renderer-pool arm:

* ``elastic``: the gateway's pool as users get it: default multiplex (256), the first
  renderer warmed from the gateway's start and awaited (``Gateway.ready()``) before the
  wave, as ``evaluate`` does; one more renderer per 256 concurrent turns, built while
  the wave runs;
* ``fixed``: the same pool (same config, same multiplex) grown to 8 renderers *before*
  the first rollout is admitted, through the public API only: 8 × multiplex acquirers
  are held until all 8 renderers are built, then released. A wave of C ≤ 8 × 256 never
  loads it past 8 × multiplex, so it never grows again: a fixed pool of 8, least-loaded
  placement.

Not ``evaluate`` itself: it builds its gateway inside, so a pool could only be grown
while rollouts are already being admitted, and eight builds at once stall the event
loop (for seconds at a time) long enough that admissions fail on the store's 5 s
write-queue timeout (512 of 2,048 in a trial).

The process starts cold, as users' do: the first renderer build imports transformers
(3 s, 250 MB); the prebuild builds one renderer before the other seven. Incremental
commits the store refuses (its write queue full for 5 s) are counted, not logged: the
final commit writes their events.
Writes one JSON object to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import psutil

from rolltap.config import EndpointConfig
from rolltap.errors import RolltapError
from rolltap.events import EventKind
from rolltap.gateway import Gateway
from rolltap.results.rollout import RolloutResult
from rolltap.rollouts import (
    HarnessContext,
    HarnessResult,
    Runner,
    Scorer,
    Task,
    WorkItem,
    parse_reward_spec,
)
from rolltap.rollouts.builtin import chat_harness
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.store import Store
from rolltap.tokens import RendererConfig, RendererPool, RendererRegistry

__all__ = ["ARMS", "FIXED_RENDERERS", "TURNS"]

ARMS = ("elastic", "fixed")
FIXED_RENDERERS = 8
TURNS = 2
CONNECTION_LIMIT = 2048


async def _hold(pool: RendererPool, holders: int) -> None:
    """Hold ``holders`` acquirers of ``pool`` until every one has its renderer, then let go."""
    entered, all_in, release = 0, asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        nonlocal entered
        async with pool.acquire():
            entered += 1
            if entered == holders:
                all_in.set()
            await release.wait()

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(holders):
                group.create_task(hold())
            await all_in.wait()
            release.set()
    except* RolltapError as failed:
        raise SystemExit(f"the fixed pool was not built: {failed.exceptions[0]!r}") from None


async def prebuild(pool: RendererPool, renderers: int) -> None:
    """Grow ``pool`` to ``renderers`` built renderers: hold renderers × multiplex acquirers.

    One renderer first: its build imports transformers, which fails in all but one of
    several threads importing it at once (see the module doc)."""
    await _hold(pool, pool.multiplex)
    await _hold(pool, renderers * pool.multiplex)


class Wave:
    """What the harnesses saw (renders by kind) and the pools over time, for one wave."""

    def __init__(self, registry: RendererRegistry) -> None:
        self.registry = registry
        self.renders: Counter[str] = Counter()
        self.t0 = time.perf_counter()
        self.timeline: list[tuple[float, int, float]] = []  # (s from t0, ready, RSS MB)

    async def sample(self, proc: psutil.Process) -> None:
        while True:
            ready = sum(p.snapshot().ready for p in self.registry.pools())
            rss = proc.memory_info().rss / 2**20
            self.timeline.append((time.perf_counter() - self.t0, ready, rss))
            await asyncio.sleep(0.25)

    async def harness(self, task: Task, ctx: HarnessContext) -> HarnessResult:
        result = await chat_harness(task, ctx)
        for event in ctx.log:
            tokens = event.payload.get("tokens") if event.kind == EventKind.MODEL_REQUEST else None
            if isinstance(tokens, dict):
                reason = tokens.get("reason")
                self.renders[str(tokens.get("render")) + (f":{reason}" if reason else "")] += 1
        return result


def _quarters(results: list[RolloutResult]) -> list[list[RolloutResult]]:
    ordered = sorted(results, key=lambda r: r.started_s)
    size = max(1, len(ordered) // 4)
    return [ordered[q * size : (q + 1) * size if q < 3 else None] for q in range(4)]


def quartiles(results: list[RolloutResult], turn: int | None = None) -> list[float | None]:
    """Median call latency (ms) of each quarter of the rollouts, in start order; of
    every call, or of the ``turn``-th call (0-based) of each rollout only."""
    out: list[float | None] = []
    for part in _quarters(results):
        calls = [ms for r in part for i, ms in enumerate(r.calls.latencies_ms) if turn in (None, i)]
        out.append(statistics.median(calls) if calls else None)
    return out


def durations(results: list[RolloutResult]) -> list[float]:
    """Median rollout duration (s, admission to end) of each quarter, in start order."""
    return [statistics.median(r.duration_s for r in part) for part in _quarters(results)]


async def run_wave(arm: str, c: int, tokenizer: str, base_url: str) -> dict[str, Any]:
    endpoint = EndpointConfig(
        base_url=base_url, model="sim", client="tokens", tokenizer=tokenizer,
        completions_api="vllm", max_connections=CONNECTION_LIMIT,
    )  # fmt: skip
    config = RendererConfig(
        tokenizer, template_kwargs=endpoint.template_kwargs, eos_tokens=endpoint.eos_tokens
    )  # the key the gateway's token calls use: they share this pool
    proc = psutil.Process()
    rss_start = proc.memory_info().rss / 2**20
    messages = [{"role": "user", "content": f"Question {i}: how many?"} for i in range(TURNS)]
    items = [WorkItem(Task(id="t", messages=messages, info={"regex": "."}), s) for s in range(c)]
    prebuild_s = None
    with tempfile.TemporaryDirectory() as tmp:
        async with await Store.open(f"sqlite:///{tmp}/tokens.db") as store:
            run = await store.create_run(f"tokens-{arm}-{c}")
            recorder = StoreRecorder(store, final_commit=False)
            async with recorder as observer, Gateway(endpoint, observers=[observer]) as gateway:
                t0 = time.perf_counter()
                if arm == "fixed":
                    await prebuild(gateway.renderers.shared(config), FIXED_RENDERERS)
                else:
                    await gateway.ready()
                prebuild_s = time.perf_counter() - t0
                runner = Runner(
                    gateway=gateway, store=store, observer=observer, run_id=run.id,
                    harness=(wave := Wave(gateway.renderers)).harness, model=endpoint.model,
                    scorer=Scorer([parse_reward_spec("regex")]), c=c,
                )  # fmt: skip
                sampler = asyncio.get_running_loop().create_task(wave.sample(proc))
                cpu0 = proc.cpu_times()
                results = await runner.run(items)
                wall = time.perf_counter() - wave.t0
                cpu1 = proc.cpu_times()
                sampler.cancel()
                pools = [p.snapshot() for p in gateway.renderers.pools()]
        commit_failures = recorder.failures
    renderers = sum(p.renderers for p in pools)
    ready_at = [t for t, ready, _ in wave.timeline if ready >= 1]
    return {
        "arm": arm,
        "C": c,
        "errors": sum(r.status != "completed" for r in results),
        "error_kinds": Counter(
            f"{r.status}: {(r.error or '')[:120]}" for r in results if r.status != "completed"
        ),
        "commit_failures": commit_failures,
        "wall_s": wall,
        "q_latency_ms": quartiles(results),
        "q_turn1_ms": quartiles(results, turn=0),
        "q_duration_s": durations(results),
        "rss_start_mb": rss_start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "pools": len(pools),
        "renderers": renderers,
        "prebuild_s": prebuild_s,
        "first_ready_s": ready_at[0] if ready_at else None,
        "renders": dict(wave.renders),
        "renders_per_s_per_renderer": sum(wave.renders.values()) / wall / max(1, renderers),
        "cpu_s": cpu1.user + cpu1.system - cpu0.user - cpu0.system,
        "last_start_s": max(r.started_s for r in results),
        "timeline": wave.timeline,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=ARMS, required=True)
    parser.add_argument("--c", type=int, required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.getLogger("rolltap.rollouts.recorder").setLevel(logging.ERROR)  # counted instead
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    row = asyncio.run(run_wave(args.arm, args.c, args.tokenizer, args.base_url))
    args.out.write_bytes(orjson.dumps(row))


if __name__ == "__main__":
    main()
