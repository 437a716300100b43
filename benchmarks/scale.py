"""Scale benchmark: one wave of C concurrent 3-turn ``chat`` rollouts against the simulator.

Each run is ``-n 1 -r C -c C``. The simulator's latency keeps the total call rate near
150 calls/s at C=2048 (4 s to first token, then 100 tokens at 10 tok/s: 14 s a call,
42 s a rollout). Prints a table (and writes benchmarks/out/scale.png with the bench extra):
wall time / ideal, errors, upstream connections, threads, RSS, open files, and the
median model-call latency by rollout start quartile (q1 = the first quarter admitted).

    python benchmarks/scale.py            # C = 512, 1024, 2048 (minutes)
    python benchmarks/scale.py --quick    # C = 32, 64, 128 with short latency
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from _plots import pyplot
from _procs import free_port, rolltap_process

from rolltap.config import EndpointConfig
from rolltap.rollouts import Task, evaluate
from rolltap.rollouts.results import RolloutResult

TURNS = 3
#: the gateway's upstream connection limit, the same for every C: connections opened
#: should track the calls in flight (reused across turns), never exceed this
CONNECTION_LIMIT = 2048


def _raise_nofile() -> int:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _quartiles(results: list[RolloutResult]) -> list[float | None]:
    ordered = sorted(results, key=lambda r: r.started_s)
    size = max(1, len(ordered) // 4)
    out: list[float | None] = []
    for q in range(4):
        part = ordered[q * size : (q + 1) * size if q < 3 else None]
        calls = [ms for r in part for ms in r.calls.latencies_ms]
        out.append(statistics.median(calls) if calls else None)
    return out


@dataclass(frozen=True, slots=True)
class Latency:
    """The simulator's latency model: time to first token, then tokens at a pace."""

    ttft_ms: float
    tokens_per_s: float
    completion_tokens: int

    @property
    def per_call_s(self) -> float:
        return self.ttft_ms / 1000 + self.completion_tokens / self.tokens_per_s

    def sim_args(self, port: int) -> list[str]:
        return [
            "sim", "--port", str(port), "--ttft-ms", str(self.ttft_ms),
            "--tokens-per-s", str(self.tokens_per_s),
            "--completion-tokens", str(self.completion_tokens),
        ]  # fmt: skip


@dataclass(slots=True)
class Peaks:
    """Maxima of this process's threads, open files and RSS, and of the connections
    the upstream holds (read off the upstream's process, which costs this one nothing)."""

    upstream: psutil.Process
    threads: int = 0
    open_files: int = 0
    rss_mb: float = 0.0
    upstream_connections: int = 0

    def sample(self, proc: psutil.Process) -> None:
        self.threads = max(self.threads, threading.active_count(), proc.num_threads())
        self.open_files = max(self.open_files, proc.num_fds())
        self.rss_mb = max(self.rss_mb, proc.memory_info().rss / 2**20)
        held = [c for c in self.upstream.net_connections("tcp") if c.raddr]
        self.upstream_connections = max(self.upstream_connections, len(held))


@asynccontextmanager
async def peaks_during(upstream: psutil.Process, interval_s: float = 1.0) -> AsyncIterator[Peaks]:
    """Sample while the body runs; the maxima seen."""
    proc, peaks = psutil.Process(), Peaks(upstream)

    async def sample() -> None:
        while True:
            peaks.sample(proc)
            await asyncio.sleep(interval_s)

    async with asyncio.TaskGroup() as group:
        sampler = group.create_task(sample())
        try:
            yield peaks
        finally:
            sampler.cancel()
    peaks.sample(proc)


async def one_wave(c: int, latency: Latency, store_dir: Path) -> dict[str, Any]:
    """Run one wave of ``c`` rollouts; the measurements."""
    task = Task(id="t", messages=[{"role": "user", "content": f"q{i}"} for i in range(TURNS)],
                info={"regex": "."})  # fmt: skip
    port = free_port()
    # The upstream runs in its own process, as a real one would: it must not share
    # this process's one core with the harnesses and the gateway being measured.
    with rolltap_process(latency.sim_args(port), f"http://127.0.0.1:{port}/health") as upstream:
        endpoint = EndpointConfig(
            base_url=f"http://127.0.0.1:{port}/v1", model="sim", max_connections=CONNECTION_LIMIT
        )
        async with peaks_during(upstream) as peaks:
            cpu0 = psutil.Process().cpu_times()
            t0 = time.perf_counter()
            result = await evaluate(
                [task], harness="chat", endpoint=endpoint, r=c, c=c, rewards=["regex"],
                store=f"sqlite:///{store_dir}/scale-{c}.db",
            )  # fmt: skip
            wall = time.perf_counter() - t0
            cpu1 = psutil.Process().cpu_times()
    ideal = TURNS * latency.per_call_s
    return {
        "C": c,
        "wall_s": wall,
        "wall/ideal": wall / ideal,
        "errors": sum(r.status != "completed" for r in result.results),
        "connections": peaks.upstream_connections,
        "threads": peaks.threads,
        "rss_mb": peaks.rss_mb,
        "open_files": peaks.open_files,
        "q_latency_ms": _quartiles(result.results),
        **_spread(result.results),
        # this process: harness SDK coroutines, gateway and store writer together
        "cpu_ms_per_call": 1000
        * (cpu1.user + cpu1.system - cpu0.user - cpu0.system)
        / max(1, sum(r.calls.calls for r in result.results)),
    }


def _spread(results: list[RolloutResult]) -> dict[str, float]:
    """Where wall time beyond the ideal goes: late starts, slow calls, slow rollouts."""
    calls = sorted(ms for r in results for ms in r.calls.latencies_ms)
    return {
        "last_start_s": max(r.started_s for r in results),
        "call_p99_ms": calls[int(0.99 * (len(calls) - 1))] if calls else 0.0,
        "call_max_ms": calls[-1] if calls else 0.0,
        "slowest_rollout_s": max(r.duration_s for r in results),
    }


def _print_spread(rows: list[dict[str, Any]]) -> None:
    print(f"{'C':>6} {'last start s':>12} {'call p99 ms':>11} {'call max ms':>11} "
          f"{'slowest rollout s':>17} {'CPU ms/call':>11}")  # fmt: skip
    for r in rows:
        print(
            f"{r['C']:>6} {r['last_start_s']:>12.2f} {r['call_p99_ms']:>11.0f} "
            f"{r['call_max_ms']:>11.0f} {r['slowest_rollout_s']:>17.1f} "
            f"{r['cpu_ms_per_call']:>11.2f}"
        )


def _print(rows: list[dict[str, Any]]) -> None:
    head = f"{'C':>6} {'wall s':>8} {'/ideal':>7} {'errors':>6} {'conns':>6} {'threads':>7} "
    print(head + f"{'RSS MB':>7} {'fds':>5}  call latency ms by start quartile q1..q4")
    for r in rows:
        qs = " ".join(f"{q:8.0f}" if q is not None else "       -" for q in r["q_latency_ms"])
        print(
            f"{r['C']:>6} {r['wall_s']:>8.1f} {r['wall/ideal']:>7.2f} {r['errors']:>6} "
            f"{r['connections']:>6} {r['threads']:>7} {r['rss_mb']:>7.0f} {r['open_files']:>5}  "
            + qs
        )


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for r in rows:
        left.plot(["q1", "q2", "q3", "q4"], r["q_latency_ms"], marker="o", label=f"C={r['C']}")
    left.set_ylim(bottom=0)
    left.set_ylabel("median model-call latency (ms)")
    left.set_xlabel("rollouts by start order")
    left.legend()
    sizes = [r["C"] for r in rows]
    right.plot(sizes, [r["wall/ideal"] for r in rows], marker="o", label="wall / ideal")
    right.axhline(1.15, linestyle="--", color="grey", label="goal 1.15")
    right.set_xscale("log", base=2)
    right.set_xlabel("concurrent rollouts C (one wave)")
    right.set_ylim(bottom=1.0)
    right.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    print(f"wrote {path}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small C and short latency")
    parser.add_argument("--sizes", type=int, nargs="*", help="C values to run")
    parser.add_argument("--plot", type=Path, default=Path("benchmarks/out/scale.png"))
    args = parser.parse_args()
    if args.quick:
        sizes, latency = [32, 64, 128], Latency(ttft_ms=200, tokens_per_s=200, completion_tokens=20)
    else:
        sizes, latency = [512, 1024, 2048], Latency(4000, tokens_per_s=10, completion_tokens=100)
    print(f"RLIMIT_NOFILE raised to {_raise_nofile()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.sizes or sizes:
            rows.append(await one_wave(c, latency, Path(tmp)))
            _print(rows[-1:])
    print()
    _print(rows)
    print()
    _print_spread(rows)
    _plot(rows, args.plot)


if __name__ == "__main__":
    asyncio.run(main())
