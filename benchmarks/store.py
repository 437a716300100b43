"""Store benchmark: incremental commit cost and sustained throughput, per backend.

(a) Serialization only: a 10,000-event session, full vs incremental serialization of a
    commit of 1 new event (10 repeats): the ratio.
(b) Commit cost of 1 new event at 10 and at 10,000 persisted events (median of 30
    commits), per backend; the goal is a ratio <= 1.5. With matplotlib installed, the
    cost over history lengths 10 ... 100,000 is plotted to benchmarks/out/store_commit.png.
(c) Sustained events/s through the serial writer: 256 sessions each committing 1-5
    events at a time; floors: 14,000 events/s (SQLite, PostgreSQL), 7,000 (MariaDB).

    python benchmarks/store.py                       # all three backends
    python benchmarks/store.py --backends sqlite --quick
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from _plots import pyplot
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.events import EventLog
from rolltap.store import Store, event_rows

SERVERS = {
    "postgresql": ("postgresql+asyncpg://postgres@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432"),
    "mariadb": ("mysql+asyncmy://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306"),
}  # fmt: skip
FLOORS = {"sqlite": 14_000, "postgresql": 14_000, "mariadb": 7_000}
OUT = Path(__file__).parent / "out"


def payload(i: int) -> dict[str, Any]:
    """A model call's worth of payload, alternating request and response (~0.6 KB)."""
    if i % 2 == 0:
        return {
            "intercept_id": f"ic-{i}", "route": "chat.completions", "dialect": "chat",
            "stream": True, "prefix_digest": "ab" * 32, "prefix_messages": i,
            "messages": [{"role": "user", "content": f"step {i}: continue 1, 2, 3, 4, 5,"}],
            "params": {"model": "gemma-3-270m", "temperature": 0.0, "max_tokens": 64},
            "rewrites": [],
        }  # fmt: skip
    return {
        "intercept_id": f"ic-{i - 1}", "status": 200, "stream": True,
        "message": {"role": "assistant", "content": " 6, 7, 8, 9, 10," * 8},
        "usage": {"prompt_tokens": 40 + i, "completion_tokens": 64},
        "finish_reason": "length", "timing": {"ttfc_ms": 41.5, "total_ms": 612.0},
    }  # fmt: skip


def grow(log: EventLog, n: int) -> None:
    for _ in range(n):
        log.append("model_request" if len(log) % 2 == 0 else "model_response", payload(len(log)))


def bench_serialization(n: int = 10_000, repeats: int = 10) -> tuple[float, float]:
    """Median seconds to serialize a commit of 1 new event: whole history vs the new event."""
    log = EventLog()
    grow(log, n + 1)
    full, incremental = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        event_rows("s", log.since(0))
        t1 = time.perf_counter()
        event_rows("s", log.since(n))
        t2 = time.perf_counter()
        full.append(t1 - t0)
        incremental.append(t2 - t1)
    return statistics.median(full), statistics.median(incremental)


async def _admin(backend: str, statement: str) -> None:
    engine = create_async_engine(SERVERS[backend][0], isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql(statement)
    finally:
        await engine.dispose()


@asynccontextmanager
async def database(backend: str) -> AsyncIterator[str]:
    """A fresh store URL on ``backend`` (a temporary SQLite file, or a new database)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db"
        return
    name = f"rt_bench_{uuid.uuid4().hex[:8]}"
    await _admin(backend, f"CREATE DATABASE {name}")
    try:
        yield f"{SERVERS[backend][1]}/{name}"
    finally:
        force = " WITH (FORCE)" if backend == "postgresql" else ""
        await _admin(backend, f"DROP DATABASE {name}{force}")


async def commit_cost(store: Store, run_id: str, history: int, repeats: int) -> float:
    """Median seconds of a commit of 1 new event onto ``history`` persisted events."""
    session = await store.create_session(run_id)
    log = EventLog()
    grow(log, history)
    await store.commit(session.id, log)
    times = []
    for _ in range(repeats):
        grow(log, 1)
        t0 = time.perf_counter()
        await store.commit(session.id, log)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def throughput(store: Store, run_id: str, sessions: int, seconds: float) -> float:
    """Events/s committed by ``sessions`` concurrent rollouts of 1-5 events per commit."""
    ids = [(await store.create_session(run_id)).id for _ in range(sessions)]
    stop = time.perf_counter() + seconds
    written = 0

    async def rollout(session_id: str, seed: int) -> None:
        nonlocal written
        rng, log = random.Random(seed), EventLog()
        while time.perf_counter() < stop:
            grow(log, rng.randint(1, 5))
            result = await store.commit(session_id, log)
            written += result.written  # after the await: no lost updates

    t0 = time.perf_counter()
    await asyncio.gather(*(rollout(sid, i) for i, sid in enumerate(ids)))
    return written / (time.perf_counter() - t0)


async def bench_backend(backend: str, histories: list[int], seconds: float) -> dict[str, Any]:
    async with database(backend) as url, await Store.open(url, upgrade=True) as store:
        run = await store.create_run(f"bench-{backend}")
        costs = {h: await commit_cost(store, run.id, h, 30) for h in histories}
        rate = await throughput(store, run.id, 256, seconds)
        return {"costs": costs, "rate": rate, "stats": store.stats()}


def report(serial: tuple[float, float], results: dict[str, dict[str, Any]]) -> None:
    full, inc = serial
    print("(a) serialization of a commit of 1 new event, 10,000-event session, median of 10")
    print(f"    full {full * 1e3:9.2f} ms   incremental {inc * 1e6:7.1f} µs   "
          f"ratio {full / inc:,.0f}x")  # fmt: skip
    print("\n(b) commit of 1 new event (median of 30)   goal: ratio <= 1.5")
    print(f"    {'backend':<11}{'at 10':>10}{'at 10,000':>12}{'ratio':>8}  met")
    for backend, r in results.items():
        small, large = r["costs"][10], r["costs"][10_000]
        print(f"    {backend:<11}{small * 1e3:>8.2f}ms{large * 1e3:>10.2f}ms"
              f"{large / small:>8.2f}  {'yes' if large / small <= 1.5 else 'NO'}")  # fmt: skip
    print("\n(c) sustained throughput, 256 sessions, 1-5 events per commit")
    print(f"    {'backend':<11}{'events/s':>10}{'floor':>9}{'txns':>8}  met")
    for backend, r in results.items():
        rate, floor = r["rate"], FLOORS[backend]
        print(f"    {backend:<11}{rate:>10,.0f}{floor:>9,}{r['stats'].transactions:>8}"
              f"  {'yes' if rate >= floor else 'NO'}")  # fmt: skip


def plot(results: dict[str, dict[str, Any]]) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for backend, r in results.items():
        xs = sorted(r["costs"])
        ax.plot(xs, [r["costs"][x] * 1e3 for x in xs], marker="o", label=backend)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("persisted events in the session")
    ax.set_ylabel("commit of 1 new event, median ms")
    ax.set_title("rolltap store: incremental commit cost vs history length")
    ax.legend()
    ax.grid(True, alpha=0.3)
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "store_commit.png", dpi=120, bbox_inches="tight")
    print(f"\nplot: {OUT / 'store_commit.png'}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql,mariadb")
    parser.add_argument("--quick", action="store_true", help="histories up to 10,000; 2 s runs")
    args = parser.parse_args()
    histories = [10, 100, 1_000, 10_000] + ([] if args.quick else [100_000])
    results: dict[str, dict[str, Any]] = {}
    for backend in args.backends.split(","):
        try:
            results[backend] = await bench_backend(backend, histories, 2.0 if args.quick else 5.0)
        except (OSError, SQLAlchemyError) as exc:
            print(f"{backend}: unreachable ({type(exc).__name__}), skipped")
    report(bench_serialization(), results)
    plot(results)


if __name__ == "__main__":
    asyncio.run(main())
