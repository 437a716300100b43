"""Shutdown: waits for leases, survives caller cancellation, reports close failures."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from pool.pool_fakes import Builder, FakeClient, identity, spin, until
from rolltap.errors import ModelPoolClosedError, PoolCloseError
from rolltap.pool import ModelClientPool

Pool = ModelClientPool[FakeClient]


async def test_aclose_waits_for_leases_and_closes_idle_clients_at_once() -> None:
    pool = Pool(4)
    leased = await pool.borrow(identity(user="a"), Builder("a"), holder="r-a")
    idle = await pool.borrow(identity(user="b"), Builder("b"))
    idle.release()
    closer = asyncio.create_task(pool.aclose())
    await until(lambda: idle.client.closed, "idle client closed")
    assert not closer.done()
    assert leased.client.close_calls == 0
    with pytest.raises(ModelPoolClosedError):
        await pool.borrow(identity(user="a"), Builder("never"))  # admission stopped
    leased.release()
    await closer
    assert leased.client.closed
    snap = pool.snapshot()
    assert (snap.clients, snap.closing, snap.leases, snap.closed) == (0, 0, 0, True)


async def test_cleanup_survives_the_callers_cancellation_and_a_later_aclose_waits() -> None:
    pool = Pool(4)
    lease = await pool.borrow(identity(), Builder(), holder="r1")
    first = asyncio.create_task(pool.aclose())
    await until(lambda: pool.snapshot().closed, "shutdown started")
    first.cancel()
    await until(first.done, "first caller cancelled")
    assert first.cancelled()
    second = asyncio.create_task(pool.aclose())
    await spin()
    assert not second.done()
    assert lease.client.close_calls == 0
    lease.release()
    await second
    assert lease.client.closed
    assert lease.client.close_calls == 1
    await pool.aclose()  # a third call returns at once


async def test_cleanup_finishes_even_when_no_one_awaits_it_any_more() -> None:
    pool = Pool(4)
    lease = await pool.borrow(identity(), Builder(), holder="r1")
    caller = asyncio.create_task(pool.aclose())
    await until(lambda: pool.snapshot().closed, "shutdown started")
    caller.cancel()
    await asyncio.gather(caller, return_exceptions=True)
    lease.release()
    await until(lambda: lease.client.closed, "cleanup closed the released client")


async def test_aclose_timeout_names_the_holders_and_leaves_leased_clients_open() -> None:
    pool = Pool(4)
    leased = await pool.borrow(identity(user="a"), Builder("a"), holder="rollout-7")
    idle = await pool.borrow(identity(user="b"), Builder("b"), holder="rollout-8")
    idle.release()
    with pytest.raises(PoolCloseError, match="rollout-7") as caught:
        await pool.aclose(timeout=0.01)
    assert "rollout-8" not in str(caught.value)
    await until(lambda: idle.client.closed, "idle client closed")
    assert leased.client.close_calls == 0
    leased.release()
    await pool.aclose()
    assert leased.client.closed


async def test_shutdown_close_failure_is_logged_counted_and_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = Pool(4)
    error = OSError("socket already gone")
    good = await pool.borrow(identity(user="a"), Builder("a"))
    bad = await pool.borrow(identity(user="b"), Builder("b", close_error=error))
    good.release()
    bad.release()
    with (
        caplog.at_level(logging.ERROR, logger="rolltap.pool"),
        pytest.raises(PoolCloseError) as caught,
    ):
        await pool.aclose()
    assert caught.value.__cause__ is error
    assert good.client.closed
    assert pool.snapshot().close_failures == 1
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [error]
    assert bad.key not in caplog.text
    with pytest.raises(PoolCloseError):
        await pool.aclose()  # still reported on a later call


async def test_eviction_close_failure_stops_new_constructions_but_keeps_lending() -> None:
    pool = Pool(2)
    error = OSError("close failed")
    kept = await pool.borrow(identity(user="kept"), Builder("kept"))
    doomed = await pool.borrow(identity(user="doomed"), Builder("doomed", close_error=error))
    doomed.release()
    newcomer = Builder("new")
    with pytest.raises(ModelPoolClosedError) as refused:
        await pool.borrow(identity(user="new"), newcomer)  # evicts doomed; its close fails
    assert refused.value.__cause__ is error
    assert newcomer.calls == 0
    snap = pool.snapshot()
    assert (snap.close_failures, snap.closing, snap.clients) == (1, 0, 1)
    with pytest.raises(ModelPoolClosedError):
        await pool.borrow(identity(user="other"), Builder("other"))
    again = await pool.borrow(identity(user="kept"), Builder("never"))  # existing: still lent
    assert again.client is kept.client
    kept.release()
    again.release()
    with pytest.raises(PoolCloseError) as caught:
        await pool.aclose()
    assert caught.value.__cause__ is error
    assert kept.client.closed


async def test_shutdown_cancels_constructions_in_progress() -> None:
    pool = Pool(4)
    build = Builder(gate=asyncio.Event())
    waiter = asyncio.create_task(pool.borrow(identity(), build))
    await until(build.started.is_set, "construction started")
    await pool.aclose()
    with pytest.raises(ModelPoolClosedError):
        await waiter
    assert build.cancelled == 1
    snap = pool.snapshot()
    assert (snap.building, snap.clients, snap.leases) == (0, 0, 0)


async def test_a_client_built_despite_shutdown_is_closed_not_lent() -> None:
    pool = Pool(4)
    gate = asyncio.Event()
    made: list[FakeClient] = []

    async def stubborn() -> FakeClient:
        with contextlib.suppress(asyncio.CancelledError):
            await gate.wait()  # a build that ignores cancellation and finishes anyway
        made.append(FakeClient("stubborn"))
        return made[0]

    waiter = asyncio.create_task(pool.borrow(identity(), stubborn))
    await until(lambda: pool.snapshot().building == 1, "construction started")
    await pool.aclose()
    with pytest.raises(ModelPoolClosedError):
        await waiter
    assert made[0].closed


async def test_a_borrower_waiting_on_an_eviction_is_refused_at_shutdown() -> None:
    pool = Pool(1)
    close_gate = asyncio.Event()
    old = await pool.borrow(identity(user="a"), Builder("a", close_gate=close_gate))
    old.release()
    build = Builder("b")
    waiter = asyncio.create_task(pool.borrow(identity(user="b"), build))
    await until(old.client.close_started.is_set, "eviction started")
    closer = asyncio.create_task(pool.aclose())
    await until(lambda: pool.snapshot().closed, "shutdown started")
    assert not closer.done()  # waits for the eviction close
    close_gate.set()
    await closer
    with pytest.raises(ModelPoolClosedError):
        await waiter
    assert build.calls == 0
    assert old.client.closed


async def test_shutdown_never_closes_an_injected_client_and_waits_for_its_lease() -> None:
    pool = Pool(2)
    external = FakeClient("external")
    pool.inject(identity(user="ext"), external)
    lease = await pool.borrow(identity(user="ext"), Builder("never"), holder="r-ext")
    owned = await pool.borrow(identity(user="own"), Builder("own"))
    owned.release()
    with pytest.raises(PoolCloseError, match="r-ext"):
        await pool.aclose(timeout=0.01)
    lease.release()
    await pool.aclose()
    assert external.close_calls == 0
    assert owned.client.closed
