"""Benchmark of rolltap.pool.ModelClientPool (a script, not a test).

1. Borrow/release cost at 1, 64 and 1,024 concurrent borrowers over 64 identities, as a
   ratio to a plain dict lookup plus a trivial await, measured in the same run. "tight":
   borrow then release at once; "held": the lease is held across one loop yield (so up to
   N leases are outstanding), against a dict lookup held across the same yield.
2. 100,000 borrow/release cycles, with the process RSS (psutil) before and after.

Run: ``python benchmarks/pool.py``
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import statistics
import time
from collections.abc import Awaitable, Callable

import psutil

from rolltap.pool import ModelClientPool

IDENTITIES = 64
OPS_PER_RUN = 131_072
REPEATS = 5
RSS_CYCLES = 100_000
KEYS = [hashlib.sha256(f"identity-{i}".encode()).hexdigest() for i in range(IDENTITIES)]


class BenchClient:
    """The cheapest possible model client."""

    async def aclose(self) -> None:
        return None


async def build() -> BenchClient:
    return BenchClient()


async def lookup(table: dict[str, BenchClient], key: str) -> BenchClient:
    return table[key]


Worker = Callable[[int, int], Awaitable[None]]


def pool_worker(pool: ModelClientPool[BenchClient], hold: bool) -> Worker:
    async def work(ops: int, offset: int) -> None:
        for i in range(ops):
            lease = await pool.borrow(KEYS[(offset + i) % IDENTITIES], build, holder="bench")
            if hold:
                await asyncio.sleep(0)
            lease.release()

    return work


def dict_worker(table: dict[str, BenchClient], hold: bool) -> Worker:
    async def work(ops: int, offset: int) -> None:
        for i in range(ops):
            await lookup(table, KEYS[(offset + i) % IDENTITIES])
            if hold:
                await asyncio.sleep(0)

    return work


async def ns_per_op(worker: Worker, concurrency: int) -> float:
    """Median over REPEATS runs of OPS_PER_RUN operations split over ``concurrency`` tasks."""
    ops = OPS_PER_RUN // concurrency
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        await asyncio.gather(*(worker(ops, j) for j in range(concurrency)))
        samples.append((time.perf_counter_ns() - start) / (ops * concurrency))
    return statistics.median(samples)


async def cost_table(pool: ModelClientPool[BenchClient]) -> None:
    table = {key: BenchClient() for key in KEYS}
    print(f"borrow/release over {IDENTITIES} identities (median of {REPEATS} x {OPS_PER_RUN} ops)")
    header = (
        f"{'borrowers':>9} | {'mode':5} | {'dict ns/op':>10} | {'pool ns/op':>10} | {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for concurrency in (1, 64, 1024):
        for hold in (False, True):
            base = await ns_per_op(dict_worker(table, hold), concurrency)
            cost = await ns_per_op(pool_worker(pool, hold), concurrency)
            mode = "held" if hold else "tight"
            print(
                f"{concurrency:>9} | {mode:5} | {base:>10.0f} | {cost:>10.0f} | {cost / base:>6.2f}"
            )


async def rss_run(pool: ModelClientPool[BenchClient]) -> None:
    process = psutil.Process()
    gc.collect()
    before = process.memory_info().rss
    start = time.perf_counter()
    await asyncio.gather(*(pool_worker(pool, True)(RSS_CYCLES // 64, j) for j in range(64)))
    elapsed = time.perf_counter() - start
    gc.collect()
    after = process.memory_info().rss
    mib = 1024 * 1024
    print()
    print(f"{RSS_CYCLES:,} borrow/release cycles (64 concurrent borrowers) in {elapsed:.2f}s")
    print(f"{'RSS before':>12} | {'RSS after':>12} | {'delta':>10}")
    print(
        f"{before / mib:>9.1f} MiB | {after / mib:>9.1f} MiB | {(after - before) / 1024:>7.0f} KiB"
    )


async def main() -> None:
    async with ModelClientPool[BenchClient](max_clients=IDENTITIES) as pool:
        for key in KEYS:  # warm: every identity has its client
            (await pool.borrow(key, build)).release()
        await cost_table(pool)
        await rss_run(pool)
        snap = pool.snapshot()
        print(f"\nsnapshot: {snap.as_dict()}")
        assert snap.constructions == IDENTITIES
        assert snap.leases == 0


if __name__ == "__main__":
    asyncio.run(main())
