"""Forks, deletion of sessions and runs, JSONL export and import."""

from __future__ import annotations

import io

import orjson
import pytest

from rolltap.events import EventLog
from rolltap.exports import export_jsonl, import_jsonl
from rolltap.store import ForkDependencyError, Store, StoreNotFoundError
from rolltap.store.schema import events, runs, sessions
from store.storekit import assert_stored, count_rows, extend, make_log, own_rows


class ForkCases:
    async def test_fork_reads_parent_prefix_then_its_own_without_copying(
        self, store: Store
    ) -> None:
        run = await store.create_run()
        base = await store.create_session(run.id)
        base_log = make_log(10, tag="base")
        await store.commit(base.id, base_log)
        forks = [await store.create_session(run.id, parent=base.id, fork_at=6) for _ in range(3)]
        for i, fork in enumerate(forks):
            assert (fork.parent_id, fork.fork_at, fork.n_events) == (base.id, 6, 6)
            log = await store.load_log(fork.id)
            extend(log, i + 1, tag=f"fork{i}")
            await store.commit(fork.id, log)
            await assert_stored(store, fork.id, list(base_log)[:6] + log[6:])
            assert await own_rows(store, fork.id) == list(range(6, 7 + i))  # no copies
        # the parent grows on; its forks still read its first 6 events
        extend(base_log, 3)
        await store.commit(base.id, base_log)
        grand = await store.create_session(run.id, parent=forks[2].id, fork_at=8)
        glog = await store.load_log(grand.id)
        extend(glog, 2, tag="grand")
        await store.commit(grand.id, glog)
        expected = list(base_log)[:6] + list(await store.events(forks[2].id))[6:8] + glog[8:]
        await assert_stored(store, grand.id, expected)
        assert await own_rows(store, grand.id) == [8, 9]

    async def test_fork_rules_for_deletion_and_rewrites(self, store: Store) -> None:
        run = await store.create_run()
        parent = await store.create_session(run.id)
        plog = make_log(5)
        await store.commit(parent.id, plog)
        child = await store.create_session(run.id, parent=parent.id, fork_at=3)
        clog = await store.load_log(child.id)
        extend(clog, 2)
        await store.commit(child.id, clog)
        with pytest.raises(ForkDependencyError):
            await store.delete_session(parent.id)
        original = list(plog)
        plog.truncate(2)  # would rewrite events the fork reads
        with pytest.raises(ForkDependencyError):
            await store.commit(parent.id, plog)
        await assert_stored(store, parent.id, original)
        plog = EventLog.from_events(original)  # the owner returns to the stored history
        plog.truncate(4)  # a rewrite above the fork point is allowed
        extend(plog, 2, tag="p")
        assert (await store.commit(parent.id, plog)).replaced
        await assert_stored(store, parent.id, list(plog))
        await assert_stored(store, child.id, original[:3] + clog[3:])
        # a fork rewound below its fork point keeps reading the parent below it
        clog.truncate(1)
        extend(clog, 1, tag="again")
        await store.commit(child.id, clog)
        await assert_stored(store, child.id, list(clog))
        assert (await store.get_session(child.id)).fork_at == 1
        assert await own_rows(store, child.id) == [1]
        deleted = await store.delete_session(parent.id, cascade=True)
        assert set(deleted) == {parent.id, child.id}
        assert await count_rows(store, events) == 0
        assert (await store.get_run(run.id)).n_sessions == 0
        with pytest.raises(StoreNotFoundError):
            await store.events(child.id)

    async def test_run_deletion_removes_sessions_and_events(self, store: Store) -> None:
        doomed, kept = await store.create_run("doomed"), await store.create_run("kept")
        for run in (doomed, kept):
            for _ in range(3):
                session = await store.create_session(run.id)
                await store.commit(session.id, make_log(4), status="completed", reward=1.0)
        source = (await store.list_sessions(run=doomed.id))[0]
        fork = await store.create_session(kept.id, parent=source.id, fork_at=2)
        with pytest.raises(ForkDependencyError):
            await store.delete_run(doomed.id)
        assert await store.delete_run(doomed.id, cascade=True) == 4
        assert [r.id for r in await store.list_runs()] == [kept.id]
        assert await count_rows(store, sessions) == 3
        assert await count_rows(store, events) == 12
        info = await store.get_run(kept.id)
        assert (info.n_sessions, info.n_finished, info.mean_reward) == (3, 3, 1.0)
        with pytest.raises(StoreNotFoundError):
            await store.get_session(fork.id)
        with pytest.raises(StoreNotFoundError):
            await store.delete_run(doomed.id)
        assert await count_rows(store, runs) == 1

    async def test_export_import_round_trip(self, store: Store) -> None:
        run = await store.create_run("exp", {"model": "m", "n": 2})
        base = await store.create_session(run.id, user="u", task={"prompt": "1, 2, 3,"})
        blog = make_log(5)
        blog.append("reward", {"reward": 0.5, "text": "✓ 你好"})
        await store.commit(base.id, blog, status="completed", reward=0.5)
        fork = await store.create_session(run.id, parent=base.id, fork_at=3)
        flog = await store.load_log(fork.id)
        extend(flog, 2, tag="f")
        await store.commit(fork.id, flog, status="failed")
        before = {s.id: (s, await store.events(s.id)) for s in await store.list_sessions()}
        buf = io.BytesIO()
        assert await export_jsonl(store, buf, run=run.id) == 2
        lines = buf.getvalue().splitlines()
        docs = {d["session"]["id"]: d for d in map(orjson.loads, lines)}
        assert docs[fork.id]["session"]["forked_from"] == {"session": base.id, "at": 3}
        assert len(docs[fork.id]["events"]) == 5  # resolved: parent's 3, then its own 2
        await store.delete_run(run.id)
        assert await import_jsonl(store, io.BytesIO(buf.getvalue())) == 2
        for sid, (info, evs) in before.items():
            got = await store.get_session(sid)
            assert (got.status, got.reward, got.user, got.task) == (
                info.status, info.reward, info.user, info.task,
            )  # fmt: skip
            await assert_stored(store, sid, evs)
        again = await store.get_run(run.id)
        assert (again.name, again.config, again.n_sessions, again.n_failed) == (
            "exp", {"model": "m", "n": 2}, 2, 1,
        )  # fmt: skip
        assert await import_jsonl(store, io.BytesIO(buf.getvalue()), skip_existing=True) == 0
