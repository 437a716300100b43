"""Run leases: renewal, expiry read as ``interrupted``, takeover and epoch fencing."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import select

from rolltap.events import EventLog
from rolltap.store import LeaseKeeper, SchemaVersionError, Store, StoreFencedError, upgrade
from rolltap.store.schema import leases, sessions
from store.storekit import assert_stored, extend, make_log, wait_until


async def _stored_status(store: Store, session_id: str) -> str:
    async with store.engine.connect() as conn:
        status = await conn.scalar(select(sessions.c.status).where(sessions.c.id == session_id))
    assert isinstance(status, str)
    return status


async def _expire(expires_at: float) -> None:
    """Wait (a few ms: the ttls here are tiny) until ``expires_at`` has passed.

    Expiry is a matter of the clock, so this one wait is on the clock."""
    await asyncio.sleep(max(expires_at - time.time(), 0.0) + 0.002)
    assert time.time() > expires_at


async def _running(store: Store, run_id: str) -> tuple[str, EventLog]:
    session = await store.create_session(run_id)
    log = make_log(2)
    await store.commit(session.id, log, status="running")
    return session.id, log


class LeaseCases:
    async def test_a_live_lease_keeps_its_sessions_running(self, store: Store) -> None:
        run = await store.create_run()
        lease = await store.acquire_lease(run.id, owner="t", ttl_s=3600)
        sid, _ = await _running(store, run.id)
        assert (await store.get_session(sid)).status == "running"
        assert [s.id for s in await store.list_sessions(run.id, "running")] == [sid]
        assert await store.list_sessions(run.id, "interrupted") == []
        assert (await store.get_run(run.id)).n_interrupted == 0
        assert lease.epoch == 1 and lease.interrupted == 0

    async def test_an_expired_lease_reads_its_unfinished_sessions_interrupted(
        self, store: Store
    ) -> None:
        run = await store.create_run()
        lease = await store.acquire_lease(run.id, owner="t", ttl_s=0.02)
        sid, _ = await _running(store, run.id)
        done = await store.create_session(run.id)
        await store.commit(done.id, make_log(1), status="completed", reward=1.0)
        await _expire(lease.expires_at)
        assert (await store.get_session(sid)).status == "interrupted"
        assert (await store.get_session(done.id)).status == "completed"
        assert [s.id for s in await store.list_sessions(run.id, "interrupted")] == [sid]
        assert await store.list_sessions(run.id, "running") == []
        info = await store.get_run(run.id)
        assert (info.n_interrupted, info.n_finished, info.n_failed) == (1, 2, 1)
        assert [r.n_interrupted for r in await store.list_runs()] == [1]
        # readers compute it; the row still holds what the lost owner wrote
        assert await _stored_status(store, sid) == "running"

    async def test_renewal_pushes_the_expiry_ahead(self, store: Store) -> None:
        run = await store.create_run()
        keeper = LeaseKeeper(store, run.id, ttl_s=0.3, interval_s=0.01)
        async with keeper as lease:
            sid, _ = await _running(store, run.id)
            await wait_until(lambda: keeper.renewals >= 3, steps=10**7)
            await _expire(lease.expires_at)  # the first expiry passed, renewals moved it
            assert (await store.get_session(sid)).status == "running"
        # released on exit: nothing renews it any more
        assert (await store.get_session(sid)).status == "interrupted"

    async def test_a_takeover_stores_interrupted_and_fences_the_old_owner(
        self, store: Store, store_url: str
    ) -> None:
        run = await store.create_run()
        old = await store.acquire_lease(run.id, owner="old", ttl_s=3600)
        sid, log = await _running(store, run.id)
        committed = list(log)
        async with await Store.open(store_url) as other:
            new = await other.acquire_lease(run.id, owner="new", ttl_s=3600)
            assert (new.epoch, new.interrupted) == (old.epoch + 1, 1)
            assert await _stored_status(store, sid) == "interrupted"
            info = await other.get_run(run.id)
            assert (info.n_interrupted, info.n_finished, info.n_failed) == (1, 1, 1)
            extend(log, 2)
            with pytest.raises(StoreFencedError):
                await store.commit(sid, log, status="completed", reward=1.0)
            with pytest.raises(StoreFencedError):
                await store.renew_lease(old)
            await assert_stored(other, sid, committed)
            assert await _stored_status(other, sid) == "interrupted"
            # the new owner's commits go through
            fresh = await other.create_session(run.id)
            await other.commit(fresh.id, make_log(1), status="completed", reward=1.0)
            assert (await other.get_session(fresh.id)).status == "completed"

    async def test_a_keeper_that_lost_its_lease_stops_and_leaves_it(
        self, store: Store, store_url: str
    ) -> None:
        run = await store.create_run()
        keeper = LeaseKeeper(store, run.id, ttl_s=3600, interval_s=0.01)
        async with keeper, await Store.open(store_url) as other:
            new = await other.acquire_lease(run.id, owner="new", ttl_s=3600)
            await wait_until(lambda: keeper.lost, steps=10**7)
        # the old keeper's exit must not release the new owner's lease
        async with store.engine.connect() as conn:
            row = (await conn.execute(select(leases.c.epoch, leases.c.expires_at))).one()
        assert tuple(row) == (new.epoch, new.expires_at)

    async def test_deleting_a_leased_run_deletes_its_lease(self, store: Store) -> None:
        run = await store.create_run()
        await store.acquire_lease(run.id, owner="t", ttl_s=3600)
        await _running(store, run.id)
        assert await store.delete_run(run.id) == 1
        async with store.engine.connect() as conn:
            assert (await conn.execute(select(leases))).all() == []

    async def test_a_store_at_the_previous_schema_upgrades_or_says_how(
        self, store_url: str
    ) -> None:
        assert await upgrade(store_url, "0001") == "0001"
        if store_url.startswith("sqlite"):
            async with await Store.open(store_url) as store:
                run = await store.create_run()
                assert (await store.acquire_lease(run.id, owner="t", ttl_s=1)).epoch == 1
            return
        with pytest.raises(SchemaVersionError) as caught:
            await Store.open(store_url)
        assert caught.value.code == "store_schema_outdated"
        assert "rolltap db upgrade" in str(caught.value)
