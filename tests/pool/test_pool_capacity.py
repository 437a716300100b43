"""The bound: LRU eviction of idle clients, closing clients holding slots, full pool."""

from __future__ import annotations

import asyncio

import pytest

from pool.pool_fakes import Builder, FakeClient, identity, run_now, until
from rolltap.errors import ModelPoolFullError
from rolltap.pool import Lease, ModelClientPool

Pool = ModelClientPool[FakeClient]


def slots_used(pool: Pool) -> int:
    snap = pool.snapshot()
    return snap.clients + snap.closing + snap.building


async def borrow_release(pool: Pool, key: str, build: Builder) -> FakeClient:
    lease = await pool.borrow(key, build)
    lease.release()
    return lease.client


async def test_idle_clients_are_evicted_least_recently_borrowed_first() -> None:
    pool = Pool(3)
    a, b, c, d, e = (identity(user=u) for u in "abcde")
    clients = {k: await borrow_release(pool, k, Builder(k[:4])) for k in (a, b, c)}
    assert await borrow_release(pool, a, Builder("unused")) is clients[a]  # a is now newest
    held_d = await pool.borrow(d, Builder("d"))
    assert clients[b].close_calls == 1  # b was least recently borrowed
    assert clients[c].close_calls == clients[a].close_calls == 0
    held_e = await pool.borrow(e, Builder("e"))
    assert clients[c].close_calls == 1
    assert clients[a].close_calls == 0
    assert pool.snapshot().evictions == 2
    again = await pool.borrow(b, Builder("b-again"))  # a is the only idle client left
    assert clients[a].close_calls == 1
    assert again.client is not clients[b]
    assert held_d.client.close_calls == held_e.client.close_calls == 0
    assert slots_used(pool) == 3


async def test_only_unleased_clients_are_evicted() -> None:
    pool = Pool(2)
    older = await pool.borrow(identity(user="a"), Builder("a"))  # leased, least recent
    idle = await borrow_release(pool, identity(user="b"), Builder("b"))
    await pool.borrow(identity(user="c"), Builder("c"))
    assert idle.close_calls == 1
    assert older.client.close_calls == 0


async def test_nothing_is_evicted_while_there_is_room() -> None:
    pool = Pool(3)
    first = await borrow_release(pool, identity(user="a"), Builder("a"))
    second = await borrow_release(pool, identity(user="b"), Builder("b"))
    await borrow_release(pool, identity(user="c"), Builder("c"))
    assert first.close_calls == second.close_calls == 0
    assert pool.snapshot().evictions == 0


async def test_full_pool_raises_at_once_when_every_client_is_leased() -> None:
    pool = Pool(2)
    leases = [await pool.borrow(identity(user=u), Builder(u)) for u in "ab"]
    late = Builder("late", gate=asyncio.Event())
    with pytest.raises(ModelPoolFullError) as caught:
        run_now(pool.borrow(identity(user="c"), late, holder="rollout-9"))
    err = caught.value
    assert (err.code, err.status, err.retryable, err.retry_after) == (
        "model_pool_full",
        429,
        True,
        1.0,
    )
    assert "rollout-9" in str(err)
    assert late.calls == 0
    assert pool.snapshot().waiting == 0  # no queue of waiters
    leases[0].release()
    lease = await pool.borrow(identity(user="c"), Builder("c"))  # not sticky
    assert leases[0].client.close_calls == 1
    assert lease.client.name == "c#1"


async def test_constructions_in_progress_hold_slots() -> None:
    pool = Pool(2)
    held = await pool.borrow(identity(user="a"), Builder("a"))
    gate = asyncio.Event()
    building = asyncio.create_task(pool.borrow(identity(user="b"), Builder("b", gate=gate)))
    await until(lambda: pool.snapshot().building == 1, "construction started")
    with pytest.raises(ModelPoolFullError):
        run_now(pool.borrow(identity(user="c"), Builder("c")))
    gate.set()
    (await building).release()
    held.release()


async def test_retry_after_is_configurable() -> None:
    pool = Pool(1, retry_after=2.5)
    held = await pool.borrow(identity(user="a"), Builder("a"))
    with pytest.raises(ModelPoolFullError) as caught:
        run_now(pool.borrow(identity(user="b"), Builder("b")))
    assert caught.value.retry_after == 2.5
    held.release()


async def test_slow_close_keeps_its_slot_until_it_finishes() -> None:
    pool = Pool(1)
    close_gate = asyncio.Event()
    old = await borrow_release(pool, identity(user="a"), Builder("a", close_gate=close_gate))
    new_build = Builder("b")
    waiter = asyncio.create_task(pool.borrow(identity(user="b"), new_build, holder="r-b"))
    await until(old.close_started.is_set, "eviction close started")
    snap = pool.snapshot()
    assert (snap.clients, snap.closing, snap.building, snap.waiting) == (0, 1, 0, 1)
    assert new_build.calls == 0  # waits for the close, not just for a free-looking pool
    joiner = asyncio.create_task(pool.borrow(identity(user="b"), new_build, holder="r-b2"))
    await until(lambda: pool.snapshot().waiting == 2, "second borrower joined")
    with pytest.raises(ModelPoolFullError):  # the closing slot is promised to b
        run_now(pool.borrow(identity(user="c"), Builder("c")))
    assert not waiter.done()
    close_gate.set()
    leases = [await waiter, await joiner]
    assert old.closed
    assert leases[0].client is leases[1].client
    assert new_build.calls == 1
    snap = pool.snapshot()
    assert (snap.clients, snap.closing, snap.building, snap.evictions) == (1, 0, 0, 1)


async def test_bound_holds_under_eviction_pressure() -> None:
    pool = Pool(3)
    gates = [asyncio.Event() for _ in range(6)]
    leases: list[Lease[FakeClient]] = []
    for i in range(6):
        task = asyncio.create_task(
            pool.borrow(identity(user=f"u{i}"), Builder(f"u{i}", close_gate=gates[i]))
        )
        if i >= 3:
            evicted = leases[i - 3].client
            await until(evicted.close_started.is_set, "eviction close started")
            snap = pool.snapshot()
            assert (snap.clients, snap.closing, snap.building, snap.waiting) == (2, 1, 0, 1)
            gates[i - 3].set()
        lease = await task
        assert slots_used(pool) == min(i + 1, 3)
        lease.release()
        leases.append(lease)
    assert pool.snapshot().evictions == 3
    assert [lease.client.closed for lease in leases] == [True, True, True, False, False, False]


async def test_injected_client_is_lent_takes_no_slot_and_is_never_evicted_or_closed() -> None:
    pool = Pool(1)
    external = FakeClient("external")
    key = identity(user="fallback")
    pool.inject(key, external)
    lease = await pool.borrow(key, Builder("never"))
    assert lease.client is external
    lease.release()
    snap = pool.snapshot()
    assert (snap.clients, snap.injected, snap.constructions) == (0, 1, 0)
    for user in ("a", "b", "c"):  # each new key evicts the previous owned one, never external
        await borrow_release(pool, identity(user=user), Builder(user))
    assert pool.snapshot().evictions == 2
    again = await pool.borrow(key, Builder("never"))
    assert again.client is external
    again.release()
    await pool.aclose()
    assert external.close_calls == 0
    assert pool.snapshot().injected == 1
