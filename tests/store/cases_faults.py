"""Faults: failed commits, lost COMMIT answers, killed connections, a full queue."""

from __future__ import annotations

import asyncio

import pytest

from rolltap.errors import StoreBusyError, StoreError
from rolltap.events import EventLog
from rolltap.store import Store
from rolltap.store.schema import events
from store.storekit import (
    Gate,
    ScriptedHooks,
    assert_stored,
    count_rows,
    extend,
    fault,
    kill_store_connections,
    make_log,
    own_rows,
    wait_until,
)


async def _sessions_with_logs(store: Store, n: int) -> tuple[str, dict[str, EventLog]]:
    run = await store.create_run()
    logs: dict[str, EventLog] = {}
    for _ in range(n):
        session = await store.create_session(run.id)
        logs[session.id] = make_log(3)
        await store.commit(session.id, logs[session.id])
    return run.id, logs


async def _commit_all(store: Store, logs: dict[str, EventLog]) -> None:
    await asyncio.gather(*(store.commit(sid, log) for sid, log in logs.items()))


async def _assert_exactly(store: Store, logs: dict[str, EventLog]) -> None:
    for sid, log in logs.items():
        await assert_stored(store, sid, list(log))
        assert await own_rows(store, sid) == list(range(len(log)))
    assert await count_rows(store, events) == sum(len(log) for log in logs.values())


class FaultCases:
    async def test_failed_commit_leaves_the_prefix_where_it_was(
        self, store: Store, hooks: ScriptedHooks
    ) -> None:
        run = await store.create_run()
        session = await store.create_session(run.id)
        log = make_log(3)
        await store.commit(session.id, log)
        committed = list(log)
        extend(log, 2)
        hooks.before.append(fault(transient=False))
        with pytest.raises(StoreError):
            await store.commit(session.id, log, status="completed", reward=1.0)
        await assert_stored(store, session.id, committed)
        info = await store.get_run(run.id)
        assert (info.n_finished, info.n_rewarded) == (0, 0)
        extend(log, 1)
        result = await store.commit(session.id, log, status="completed")
        assert (result.written, result.replaced) == (3, False)  # everything past the old prefix
        await assert_stored(store, session.id, list(log))

    async def test_failure_in_a_group_fails_only_its_own_commit(
        self, store: Store, hooks: ScriptedHooks
    ) -> None:
        _, logs = await _sessions_with_logs(store, 5)
        ids = list(logs)
        committed = {sid: list(log) for sid, log in logs.items()}
        for log in logs.values():
            extend(log, 2)
        gate = Gate()
        # the group of four fails, then each is retried alone: the first retry fails
        hooks.before.extend([gate, fault(transient=False), fault(transient=False)])
        first = asyncio.ensure_future(store.commit(ids[0], logs[ids[0]]))
        await gate.entered.wait()  # the others queue up behind it and form one group
        others = [asyncio.ensure_future(store.commit(s, logs[s])) for s in ids[1:]]
        await wait_until(lambda: store.stats().queued == 4)
        gate.opened.set()
        await first
        results = await asyncio.gather(*others, return_exceptions=True)
        assert isinstance(results[0], StoreError)
        assert not any(isinstance(r, BaseException) for r in results[1:])
        await assert_stored(store, ids[1], committed[ids[1]])
        for sid in [ids[0], *ids[2:]]:
            await assert_stored(store, sid, list(logs[sid]))

    async def test_lost_commit_answer_is_written_exactly_once(
        self, store: Store, hooks: ScriptedHooks
    ) -> None:
        _, logs = await _sessions_with_logs(store, 10)
        for log in logs.values():
            extend(log, 3)
        hooks.after.append(fault(transient=True))  # COMMIT landed; its answer did not
        await _commit_all(store, logs)
        await _assert_exactly(store, logs)
        assert store.stats().reconnects >= 1

    async def test_killed_connection_loses_and_duplicates_nothing(
        self, store: Store, store_url: str, hooks: ScriptedHooks
    ) -> None:
        if store_url.startswith("sqlite"):
            pytest.skip("SQLite has no server connection to kill (lost-answer case covers it)")
        _, logs = await _sessions_with_logs(store, 20)
        assert await kill_store_connections(store_url) >= 1  # idle writer
        for log in logs.values():
            extend(log, 2)
        await _commit_all(store, logs)
        await _assert_exactly(store, logs)
        gate = Gate()
        hooks.before.append(gate)  # now kill it inside a transaction, before COMMIT
        for log in logs.values():
            extend(log, 2)
        commits = asyncio.gather(*(store.commit(s, g) for s, g in logs.items()))
        await gate.entered.wait()
        assert await kill_store_connections(store_url) >= 1
        gate.opened.set()
        await commits
        await _assert_exactly(store, logs)
        assert store.stats().reconnects >= 2

    async def test_full_queue_refuses_creations_never_commits(self, store_url: str) -> None:
        hooks, gate = ScriptedHooks(), Gate()
        async with await Store.open(
            store_url, upgrade=True, hooks=hooks, queue_size=2, busy_timeout=0.05
        ) as store:
            run_id, logs = await _sessions_with_logs(store, 4)
            for log in logs.values():
                extend(log, 1)
            ids = list(logs)
            hooks.before.append(gate)
            held = asyncio.ensure_future(store.commit(ids[0], logs[ids[0]]))
            await gate.entered.wait()
            creates = [asyncio.ensure_future(store.create_session(run_id)) for _ in range(2)]
            await wait_until(lambda: store.stats().queued == 2)
            with pytest.raises(StoreBusyError) as busy:
                await store.create_session(run_id)
            assert busy.value.retryable and busy.value.code == "store_busy"
            # commits past the places of the queue are accepted all the same
            queued = [asyncio.ensure_future(store.commit(s, logs[s])) for s in ids[1:]]
            await wait_until(lambda: store.stats().queued == 5)
            assert store.stats().pending_commits == 4  # the held one and three queued
            gate.opened.set()
            await asyncio.gather(held, *queued, *creates)
            await _assert_exactly(store, logs)
            assert store.stats().pending_commits == store.stats().pending_bytes == 0

    async def test_close_flushes_the_queue_and_cancels_a_stuck_writer(self, store_url: str) -> None:
        hooks = ScriptedHooks()
        store = await Store.open(store_url, upgrade=True, hooks=hooks)
        _, logs = await _sessions_with_logs(store, 3)
        for log in logs.values():
            extend(log, 2)
        gate = Gate()
        hooks.before.append(gate)
        first, *others = logs.items()
        commits = [asyncio.ensure_future(store.commit(*first))]
        await gate.entered.wait()
        commits += [asyncio.ensure_future(store.commit(s, g)) for s, g in others]
        await wait_until(lambda: store.stats().queued == 2)
        closing = asyncio.ensure_future(store.aclose())
        gate.opened.set()
        await asyncio.gather(closing, *commits)  # everything queued was written
        async with await Store.open(store_url, hooks=hooks) as reopened:
            await _assert_exactly(reopened, logs)
            sid = next(iter(logs))
            extend(logs[sid], 1)
            stuck = Gate()
            hooks.before.append(stuck)
            held = asyncio.ensure_future(reopened.commit(sid, logs[sid]))
            await stuck.entered.wait()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await reopened.aclose()
            with pytest.raises(StoreError):
                await held  # cancelled with the writer: told, not left hanging
