"""Scale benchmark: one wave of C concurrent 3-turn ``chat`` rollouts against the simulator.

Each run is ``-n 1 -r C -c C``. The simulator's latency keeps the total call rate near
150 calls/s at C=2048 (4 s to first token, then 100 tokens at 10 tok/s: 14 s a call,
42 s a rollout). Prints a table (and writes benchmarks/out/scale.png with the bench extra):
wall time / ideal, errors, upstream connections, threads, RSS, open files, and the
median model-call latency by rollout start quartile (q1 = the first quarter admitted).

    python benchmarks/scale.py            # C = 512, 1024, 2048 (minutes)
    python benchmarks/scale.py --quick    # C = 32, 64, 128 with short latency

Every C runs three ways in one run: one process (``workers = 0``), the defaults (what a
plain ``rolltap eval -c C`` does: ``workers = "auto"``, which from C = 1,024 on two cores
or more is local worker processes) and ``--ray`` with 2 workers on a two-node Ray cluster that the
benchmark starts once on loopback (``--no-ray`` skips it; its waves are repeated
``--ray-repeat`` times, median wall). Wall is one wave's, from the first submission to
the last result (worker start apart, in ``start s``); CPU per model call sums the driver
and worker processes (``psutil`` over the process tree, the simulator left out; Ray's own
processes apart). Issue 28's goals are printed for the defaults at the largest C, with one
process in the same run beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import resource
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil
from _cputree import TreeCpu
from _plots import pyplot, save
from _procs import cpu_seconds, free_port, rolltap_process
from _ray_cluster import two_node_cluster

import rolltap
from rolltap.results.rollout import RolloutResult
from rolltap.rollouts import Hooks, RunConfig
from rolltap.store import Store

TURNS = 3
#: the gateway's upstream connection limit, the same for every C: connections opened
#: should track the calls in flight (reused across turns), never exceed this
CONNECTION_LIMIT = 2048
#: numbers each wave's store file
_WAVES = itertools.count()


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
    the upstream holds (its open sockets, less those it had before the wave: its
    listener and its own socket pairs).

    Sampled on the wave's own event loop, so each sample must be cheap: the upstream's
    sockets are counted from its descriptors (a readlink each, ~3 ms for 2,048), not
    with ``psutil.Process.net_connections``, which parses the whole machine's TCP table
    in Python (8,000+ lines at C = 2,048: tens of ms of this loop's time every second,
    a stall of the one-process wave that the worker modes' driver did not suffer).
    """

    upstream: psutil.Process
    threads: int = 0
    open_files: int = 0
    rss_mb: float = 0.0
    upstream_connections: int = 0
    idle_sockets: int = 0

    def sample(self, proc: psutil.Process) -> None:
        self.threads = max(self.threads, threading.active_count(), proc.num_threads())
        self.open_files = max(self.open_files, proc.num_fds())
        self.rss_mb = max(self.rss_mb, proc.memory_info().rss / 2**20)
        held = _sockets(self.upstream.pid) - self.idle_sockets
        self.upstream_connections = max(self.upstream_connections, held)


def _sockets(pid: int) -> int:
    fds = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except FileNotFoundError:
            continue  # closed while we looked
    return count


@asynccontextmanager
async def peaks_during(upstream: psutil.Process, interval_s: float = 1.0) -> AsyncIterator[Peaks]:
    """Sample while the body runs; the maxima seen."""
    proc, peaks = psutil.Process(), Peaks(upstream, idle_sockets=_sockets(upstream.pid))

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


@dataclass(frozen=True, slots=True)
class Mode:
    """Where a wave's rollouts run: this process, ``workers`` local processes, or Ray."""

    label: str
    fields: dict[str, Any]


def modes(cluster: str | None) -> list[Mode]:
    # "defaults": what a plain ``rolltap eval -c C`` does (``workers = "auto"``)
    out = [Mode("1 process", {"workers": 0}), Mode("defaults", {})]
    if cluster is not None:
        out.append(Mode("--ray (2 nodes)", {"ray": cluster, "workers": 2}))
    return out


def _config(c: int, port: int, tasks: Path, store: str, mode: Mode) -> RunConfig:
    endpoint = {"base_url": f"http://127.0.0.1:{port}/v1", "model": "sim",
                "max_connections": CONNECTION_LIMIT}  # fmt: skip
    return RunConfig.model_validate({
        "tasks": str(tasks), "harness": "chat", "endpoint": "sim", "endpoints": {"sim": endpoint},
        "r": c, "c": c, "rewards": ["regex"], "store": store, **mode.fields,
    })  # fmt: skip


@dataclass(frozen=True, slots=True)
class Shape:
    """A wave's shape: the simulator's latency, turns per rollout, and the store (None:
    a fresh SQLite file per wave; a server URL: one database, upgraded first)."""

    latency: Latency
    turns: int = TURNS
    store: str | None = None


async def one_wave(
    c: int, mode: Mode, shape: Shape, upstream: psutil.Process, port: int, store_dir: Path
) -> dict[str, Any]:
    """Run one wave of ``c`` rollouts where ``mode`` says; the measurements. ``wall``:
    from the first submission (the workers are up) to the last result."""
    tasks = store_dir / "tasks.jsonl"
    messages = [{"role": "user", "content": f"q{i}"} for i in range(shape.turns)]
    tasks.write_bytes(orjson.dumps({"id": "t", "messages": messages, "info": {"regex": "."}}))
    store = shape.store or f"sqlite:///{store_dir}/scale-{c}-{next(_WAVES)}.db"
    marks: dict[str, float] = {}

    def mark(name: str) -> None:
        marks[name] = time.perf_counter()

    hooks = Hooks(on_plan=lambda _run, _n: mark("plan"), on_result=lambda _res: mark("last"))
    async with peaks_during(upstream) as peaks:
        with TreeCpu(exclude={upstream.pid}) as cpu:
            sim0 = cpu_seconds(upstream)
            t0 = time.perf_counter()
            result = await rolltap.evaluate(_config(c, port, tasks, store, mode), hooks=hooks)
            total = time.perf_counter() - t0
            sim_cpu = cpu_seconds(upstream) - sim0
    wall = marks["last"] - marks["plan"]
    ideal = shape.turns * shape.latency.per_call_s
    calls = max(1, sum(r.calls.calls for r in result.results))
    spent = cpu.by_kind()
    worker_rss = [w["stats"].get("peak_rss", 0) / 2**20 for w in result.workers]
    qs = _quartiles(result.results)
    label = mode.label
    if not mode.fields:  # what auto picked
        label += f" ({len(result.workers)} workers)" if result.workers else " (1 process)"
    return {
        "mode": label, "C": c, "wall_s": wall, "wall/ideal": wall / ideal,
        "start_s": marks["plan"] - t0, "total_s": total,
        "errors": sum(r.status != "completed" for r in result.results),
        "connections": peaks.upstream_connections, "threads": peaks.threads,
        "driver_rss_mb": peaks.rss_mb, "open_files": peaks.open_files,
        # in one process the driver is the worker
        "worker_rss_mb": worker_rss or [peaks.rss_mb],
        "nodes": len({w["node"] for w in result.workers}),
        "q_latency_ms": qs,
        "q1/q4": qs[0] / qs[3] if qs[0] and qs[3] else float("nan"),
        **_spread(result.results),
        # harness SDK coroutines, gateways, store writer, driver: every process of ours
        # but the simulator (and Ray's own processes, apart)
        "cpu_ms_per_call": 1000 * (spent.get("driver", 0.0) + spent.get("worker", 0.0)) / calls,
        "ray_cpu_ms_per_call": 1000 * spent.get("ray", 0.0) / calls,
        # of which the driver's (with --workers/--ray: the SQLite writer, the feed), and
        # the simulator's own, which shares the cores
        "driver_cpu_ms_per_call": 1000 * spent.get("driver", 0.0) / calls,
        "sim_cpu_ms_per_call": 1000 * sim_cpu / calls,
    }  # fmt: skip


def _spread(results: list[RolloutResult]) -> dict[str, float]:
    """Where wall time beyond the ideal goes: late starts, slow calls, slow rollouts."""
    calls = sorted(ms for r in results for ms in r.calls.latencies_ms)
    starts = [r.started_s for r in results]
    return {
        "last_start_s": max(starts) - min(starts),
        "call_p99_ms": calls[int(0.99 * (len(calls) - 1))] if calls else 0.0,
        "call_max_ms": calls[-1] if calls else 0.0,
        "slowest_rollout_s": max(r.duration_s for r in results),
    }


async def measure(
    sizes: list[int], shape: Shape, cluster: str | None, repeat: int, tmp: Path
) -> list[dict[str, Any]]:
    """Every mode at every C (Ray ``repeat`` times: the run with the median wall, the
    other walls kept); a fresh simulator for each C."""
    rows = []
    for c in sizes:
        port = free_port()
        # The upstream runs in its own process, as a real one would: it must not share
        # the measured processes' cores' accounting with the harnesses and gateways
        health = f"http://127.0.0.1:{port}/health"
        with rolltap_process(shape.latency.sim_args(port), health) as sim:
            for mode in modes(cluster):
                tries = []
                for _ in range(repeat if "ray" in mode.fields else 1):
                    tries.append(await one_wave(c, mode, shape, sim, port, tmp))
                    print(f"  {mode.label} C={c}: wall {tries[-1]['wall_s']:.1f} s", flush=True)
                tries.sort(key=lambda r: r["wall_s"])
                row = tries[len(tries) // 2]
                row["walls"] = [r["wall_s"] for r in tries]
                rows.append(row)
                _print(rows[-1:])
    return rows


def _mb(values: list[float]) -> str:
    return "/".join(f"{v:.0f}" for v in values)


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'mode':<16} {'C':>5} {'wall s':>7} {'/ideal':>6} {'start s':>7} {'q1/q4':>5} "
          f"{'errors':>6} {'conns':>5} {'peak RSS/worker MB':>18} {'driver MB':>9} "
          f"{'CPU ms/call':>11} {'driver':>6} {'sim':>5} {'ray ms/call':>11}  walls")  # fmt: skip
    for r in rows:
        walls = " ".join(f"{w:.1f}" for w in r["walls"]) if len(r["walls"]) > 1 else ""
        print(
            f"{r['mode']:<16} {r['C']:>5} {r['wall_s']:>7.1f} {r['wall/ideal']:>6.2f} "
            f"{r['start_s']:>7.1f} {r['q1/q4']:>5.2f} {r['errors']:>6} {r['connections']:>5} "
            f"{_mb(r['worker_rss_mb']):>18} {r['driver_rss_mb']:>9.0f} "
            f"{r['cpu_ms_per_call']:>11.2f} {r['driver_cpu_ms_per_call']:>6.2f} "
            f"{r['sim_cpu_ms_per_call']:>5.2f} {r['ray_cpu_ms_per_call']:>11.2f}  {walls}"
        )


def _print_spread(rows: list[dict[str, Any]]) -> None:
    print(f"{'mode':<16} {'C':>5} {'last start s':>12} {'call p99 ms':>11} {'call max ms':>11} "
          f"{'slowest rollout s':>17}  call latency ms by start quartile q1..q4")  # fmt: skip
    for r in rows:
        qs = " ".join(f"{q:7.0f}" if q is not None else "      -" for q in r["q_latency_ms"])
        print(
            f"{r['mode']:<16} {r['C']:>5} {r['last_start_s']:>12.2f} {r['call_p99_ms']:>11.0f} "
            f"{r['call_max_ms']:>11.0f} {r['slowest_rollout_s']:>17.1f}  {qs}"
        )


def _row(rows: list[dict[str, Any]], mode: str, c: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["mode"].startswith(mode) and r["C"] == c), None)


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _print_goals(rows: list[dict[str, Any]]) -> None:
    """The issue's goals, each against one process in the same run."""
    top = max(r["C"] for r in rows)
    one, plain = _row(rows, "1 process", top), _row(rows, "defaults", top)
    if one is not None and plain is not None:
        print(f"C={top}, {plain['mode']}: wall/ideal {plain['wall/ideal']:.2f} (goal ≤ 1.35; one "
              f"process {one['wall/ideal']:.2f}) → {_verdict(plain['wall/ideal'] <= 1.35)}; "
              f"CPU per call over all its processes {plain['cpu_ms_per_call']:.2f} ms (goal ≤ 5; "
              f"one process {one['cpu_ms_per_call']:.2f}) → "
              f"{_verdict(plain['cpu_ms_per_call'] <= 5.0)}")  # fmt: skip
    worst = max(rows, key=lambda r: r["q1/q4"])
    print(f"q1/q4 worst {worst['q1/q4']:.2f} ({worst['mode']}, C={worst['C']}; goal ≤ 1.2) → "
          f"{_verdict(all(r['q1/q4'] <= 1.2 for r in rows))}")  # fmt: skip
    errors = sum(r["errors"] for r in rows)
    print(f"errors: {errors} in all (goal 0) → {_verdict(errors == 0)}")
    for c in sorted({r["C"] for r in rows}):
        ray, local = _row(rows, "--ray", c), _row(rows, "defaults (", c)
        if local is not None and "workers" not in local["mode"]:
            continue  # auto stayed in one process: no local processes to compare with
        if ray is not None and local is not None:
            ratio = ray["wall_s"] / local["wall_s"]
            print(f"C={c}: Ray wall (median of {len(ray['walls'])}) / local processes' "
                  f"= {ratio:.3f} (goal ≤ 1.10) → {_verdict(ratio <= 1.10)}")  # fmt: skip


def _plot(rows: list[dict[str, Any]], path: Path, copy: Path | None) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(15, 4))
    labels = list(dict.fromkeys(r["mode"] for r in rows))
    top = max(r["C"] for r in rows)
    for label in labels:
        mine = [r for r in rows if r["mode"] == label]
        sizes = [r["C"] for r in mine]
        left.plot(sizes, [r["wall/ideal"] for r in mine], marker="o", label=label)
        mid.plot(sizes, [r["cpu_ms_per_call"] for r in mine], marker="o", label=label)
        at_top = [r for r in mine if r["C"] == top]
        if at_top:
            right.plot(["q1", "q2", "q3", "q4"], at_top[0]["q_latency_ms"], marker="o", label=label)
    left.axhline(1.15, linestyle="--", color="grey", label="goal 1.15")
    left.set_ylabel("wall / ideal (one wave)")
    mid.set_ylabel("CPU ms per model call (driver + workers)")
    for ax in (left, mid):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent rollouts C")
        ax.legend()
    left.set_ylim(bottom=1.0)
    mid.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    right.set_ylabel(f"median call latency (ms), C={top}")
    right.set_xlabel("rollouts by start order")
    right.legend(loc="lower right")
    save(fig, path)
    if copy is not None:
        shutil.copyfile(path, copy)
        print(f"copied to {copy}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small C and short latency")
    parser.add_argument("--sizes", type=int, nargs="*", help="C values to run")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    parser.add_argument("--ray-repeat", type=int, default=3, help="Ray waves per C (median)")
    parser.add_argument("--turns", type=int, default=TURNS, help="model calls per rollout")
    parser.add_argument("--store", help="a PostgreSQL/MySQL URL (default: SQLite per wave)")
    parser.add_argument("--plot", type=Path, default=Path("benchmarks/out/scale.png"))
    parser.add_argument("--copy-plot", type=Path, default=Path("docs/img/scale.png"),
                        help="where the full run's plot is copied (not with --quick)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        sizes, latency = [32, 64, 128], Latency(ttft_ms=200, tokens_per_s=200, completion_tokens=20)
    else:
        sizes, latency = [512, 1024, 2048], Latency(4000, tokens_per_s=10, completion_tokens=100)
    print(f"RLIMIT_NOFILE raised to {_raise_nofile()} (the workers and the cluster inherit it)")
    with contextlib.ExitStack() as stack:
        cluster = None if args.no_ray else stack.enter_context(two_node_cluster())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.store is not None:
            async with await Store.open(args.store, upgrade=True):
                pass  # what rolltap db upgrade does
        shape = Shape(latency, args.turns, args.store)
        rows = await measure(args.sizes or sizes, shape, cluster, args.ray_repeat, tmp)
    print()
    _print(rows)
    print()
    _print_spread(rows)
    print()
    _print_goals(rows)
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    args.plot.with_suffix(".json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    _plot(rows, args.plot, None if args.quick else args.copy_plot)


if __name__ == "__main__":
    asyncio.run(main())
