"""Coalesced creation: one construction per key, shared by every concurrent borrower."""

from __future__ import annotations

import asyncio

import pytest

from pool.pool_fakes import Builder, FakeClient, identity, until
from rolltap.pool import Lease, ModelClientPool

Pool = ModelClientPool[FakeClient]


def borrowers(
    pool: Pool, key: str, build: Builder, count: int
) -> list[asyncio.Task[Lease[FakeClient]]]:
    return [asyncio.create_task(pool.borrow(key, build, holder=f"r{i}")) for i in range(count)]


async def test_fifty_concurrent_borrowers_share_one_construction() -> None:
    pool = Pool(4)
    gate = asyncio.Event()
    build = Builder(gate=gate)
    tasks = borrowers(pool, identity(), build, 50)
    await until(lambda: pool.snapshot().waiting == 50, "50 borrowers waiting")
    await until(build.started.is_set, "construction started")
    assert build.calls == 1
    assert pool.snapshot().building == 1
    gate.set()
    leases = await asyncio.gather(*tasks)
    assert {id(lease.client) for lease in leases} == {id(build.built[0])}
    assert build.calls == 1
    snap = pool.snapshot()
    assert (snap.constructions, snap.clients, snap.leases, snap.waiting) == (1, 1, 50, 0)


async def test_cancelling_one_waiter_does_not_cancel_the_shared_construction() -> None:
    pool = Pool(4)
    gate = asyncio.Event()
    build = Builder(gate=gate)
    tasks = borrowers(pool, identity(), build, 3)
    await until(lambda: pool.snapshot().waiting == 3, "3 borrowers waiting")
    tasks[0].cancel()
    await until(tasks[0].done, "cancelled borrower finished")
    assert tasks[0].cancelled()
    assert (build.cancelled, pool.snapshot().building, pool.snapshot().waiting) == (0, 1, 2)
    gate.set()
    leases = await asyncio.gather(*tasks[1:])
    assert leases[0].client is leases[1].client is build.built[0]
    assert build.calls == 1
    assert build.cancelled == 0
    assert pool.snapshot().leases == 2  # the cancelled waiter holds no lease


async def test_construction_completes_when_every_waiter_is_cancelled() -> None:
    pool = Pool(4)
    gate = asyncio.Event()
    build = Builder(gate=gate)
    tasks = borrowers(pool, identity(), build, 2)
    await until(lambda: pool.snapshot().waiting == 2, "2 borrowers waiting")
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    gate.set()
    await until(lambda: pool.snapshot().building == 0, "construction finished")
    snap = pool.snapshot()
    assert (snap.clients, snap.leases) == (1, 0)  # idle in the pool, not leaked as a lease
    lease = await pool.borrow(identity(), Builder("unused"))
    assert lease.client is build.built[0]
    assert build.calls == 1


async def test_a_grant_that_races_the_borrowers_cancellation_is_handed_back() -> None:
    pool = Pool(4)
    gate = asyncio.Event()
    build = Builder(gate=gate)
    borrow = pool.borrow(identity(), build, holder="racer")
    grant = borrow.send(None)  # suspended on its grant
    assert isinstance(grant, asyncio.Future)
    gate.set()
    await until(grant.done, "lease granted")
    assert pool.snapshot().leases == 1
    with pytest.raises(asyncio.CancelledError):
        borrow.throw(asyncio.CancelledError())  # cancelled before it could resume
    assert pool.snapshot().leases == 0
    assert pool.snapshot().clients == 1


async def test_failed_construction_reaches_every_waiter_and_is_not_cached() -> None:
    pool = Pool(4)
    gate = asyncio.Event()
    error = RuntimeError("upstream config broken")
    failing = Builder(gate=gate, error=error)
    tasks = borrowers(pool, identity(), failing, 5)
    await until(lambda: pool.snapshot().waiting == 5, "5 borrowers waiting")
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(result is error for result in results)
    assert failing.calls == 1
    snap = pool.snapshot()
    assert (snap.clients, snap.building, snap.leases) == (0, 0, 0)
    working = Builder("retry")
    lease = await pool.borrow(identity(), working)
    assert working.calls == 1
    assert lease.client is working.built[0]
    assert pool.snapshot().constructions == 2


async def test_forty_waves_of_mixed_borrowers_build_each_identity_once() -> None:
    keys = [identity(user=f"user{i % 4}", credential=f"sk-{i // 4}") for i in range(8)]
    builders = {key: Builder(f"k{i}") for i, key in enumerate(keys)}
    pool = Pool(8)
    held: list[Lease[FakeClient]] = []

    async def borrower(n: int, wave: int) -> None:
        key = keys[(n * 3 + wave) % 8]
        style = (n + wave) % 4
        if style == 0:
            async with await pool.borrow(key, builders[key], holder=f"w{wave}-{n}"):
                await asyncio.sleep(0)
        elif style == 1:
            held.append(await pool.borrow(key, builders[key]))
        else:
            lease = await pool.borrow(key, builders[key])
            lease.release()

    for wave in range(40):
        tasks = [asyncio.create_task(borrower(n, wave)) for n in range(32)]
        await asyncio.sleep(0)  # let every borrower start (yield only; no timing)
        tasks[wave % 32].cancel()  # one borrower per wave is cancelled mid-flight
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(t.cancelled() or t.exception() is None for t in tasks)
        if wave % 5 == 4:
            for lease in held:
                lease.release()
            held.clear()
    assert {key: b.calls for key, b in builders.items()} == dict.fromkeys(keys, 1)
    snap = pool.snapshot()
    assert (snap.constructions, snap.clients, snap.evictions, snap.leases) == (8, 8, 0, len(held))
