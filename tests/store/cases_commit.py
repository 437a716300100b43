"""Incremental commit: appends, no-ops, truncation, counts, payloads, concurrency."""

from __future__ import annotations

import asyncio
import random

import pytest

from rolltap.events import EventLog
from rolltap.store import Store, StoreValidationError
from rolltap.store.schema import events
from store.storekit import (
    Gate,
    ScriptedHooks,
    assert_stored,
    count_rows,
    count_statements,
    extend,
    make_log,
)


class CommitCases:
    async def test_append_inserts_only_events_past_the_prefix(self, store: Store) -> None:
        run = await store.create_run("r")
        session = await store.create_session(run.id)
        log = make_log(3)
        first = await store.commit(session.id, log)
        assert (first.written, first.replaced, first.n_events) == (3, False, 3)
        extend(log, 2)
        with count_statements(store) as seen:
            second = await store.commit(session.id, log)
        assert (second.written, second.replaced, second.n_events) == (2, False, 5)
        inserts = seen.matching("INSERT INTO ROLLTAP_EVENTS")
        assert len(inserts) == 1, seen.seen  # one batched statement for the events
        params = inserts[0][1]
        rows = params if isinstance(params, list | tuple) and inserts[0][2] else [params]
        assert len(rows) == 2
        assert len(seen.matching("UPDATE")) == 1  # the session's counters, same transaction
        # the run's aggregates: one upsert, same transaction
        assert len(seen.matching("INSERT INTO ROLLTAP_RUN_STATS")) == 1, seen.seen
        assert not seen.matching("DELETE")
        await assert_stored(store, session.id, list(log))

    async def test_commit_without_new_events_issues_no_statement(self, store: Store) -> None:
        run = await store.create_run()
        session = await store.create_session(run.id)
        log = make_log(4)
        await store.commit(session.id, log, status="running")
        with count_statements(store) as seen:
            result = await store.commit(session.id, log)
            again = await store.commit(session.id, log, status="running")
        assert result.noop and again.noop
        assert seen.seen == []

    async def test_history_cut_below_the_prefix_is_replaced_whole(self, store: Store) -> None:
        run = await store.create_run()
        session = await store.create_session(run.id)
        log = make_log(6)
        await store.commit(session.id, log)
        log.truncate(2)
        result = await store.commit(session.id, log)
        assert (result.replaced, result.n_events) == (True, 2)
        await assert_stored(store, session.id, list(log))
        # cut below the prefix and regrown past it: still a replacement
        extend(log, 1)
        await store.commit(session.id, log)
        log.truncate(1)
        extend(log, 5, tag="regrown")
        result = await store.commit(session.id, log)
        assert result.replaced and result.written == 6
        await assert_stored(store, session.id, list(log))
        assert await count_rows(store, events) == 6

    async def test_truncation_during_an_inflight_commit_is_not_forgotten(
        self, store: Store, hooks: ScriptedHooks
    ) -> None:
        run = await store.create_run()
        session = await store.create_session(run.id)
        log = make_log(4)
        gate = Gate()
        hooks.before.append(gate)
        commit = asyncio.ensure_future(store.commit(session.id, log))
        await gate.entered.wait()
        log.truncate(1)  # after the snapshot, before the commit is durable
        extend(log, 4, tag="late")
        gate.opened.set()
        assert (await commit).n_events == 4
        result = await store.commit(session.id, log)
        assert result.replaced
        await assert_stored(store, session.id, list(log))

    async def test_run_counts_follow_each_commit(self, store: Store) -> None:
        run = await store.create_run("counts")
        ids = [(await store.create_session(run.id)).id for _ in range(4)]
        logs = [make_log(1) for _ in ids]
        await store.commit(ids[0], logs[0], status="running")
        await store.commit(ids[1], logs[1], status="completed", reward=1.0)
        await store.commit(ids[2], logs[2], status="timeout", reward=0.0)
        info = await store.get_run(run.id)
        assert (info.n_sessions, info.n_finished, info.n_failed) == (4, 2, 1)
        assert info.mean_reward == pytest.approx(0.5)
        await store.commit(ids[0], logs[0], status="completed", reward=0.25)
        await store.commit(ids[2], logs[2], status="completed", reward=1.0)
        info = await store.get_run(run.id)
        assert (info.n_finished, info.n_failed, info.n_rewarded) == (3, 0, 3)
        assert info.mean_reward == pytest.approx(0.75)
        with pytest.raises(StoreValidationError):
            await store.commit(ids[3], logs[3], status="exploded")
        listed = await store.list_sessions(run=run.id, status="completed")
        assert {s.id for s in listed} == set(ids[:3])

    async def test_unicode_and_one_mib_payloads(self, store: Store) -> None:
        run = await store.create_run("Ωμέγα 🚀", {"note": "日本語"})
        session = await store.create_session(run.id, user="José 🧪", task={"q": "Привет"})
        log = EventLog()
        log.append("model_request", {"messages": [{"role": "user", "content": "𝔘𝔫𝔦 ✓ \u0000"}]})
        big = "ü" * (512 * 1024)  # 1 MiB of UTF-8
        for i in range(3):
            log.append("model_response", {"message": {"content": big + str(i)}})
        await store.commit(session.id, log)
        await assert_stored(store, session.id, list(log))
        got = await store.get_session(session.id)
        assert (got.user, got.task) == ("José 🧪", {"q": "Привет"})
        assert (await store.get_run(run.id)).name == "Ωμέγα 🚀"
        with pytest.raises(StoreValidationError):
            await store.commit(session.id, _unserializable(log))

    async def test_100_sessions_committing_concurrently_keep_their_order(
        self, store: Store
    ) -> None:
        run = await store.create_run()
        ids = [(await store.create_session(run.id)).id for _ in range(100)]
        logs = {sid: EventLog() for sid in ids}
        rounds = 8

        async def rollout(sid: str, seed: int) -> int:
            rng, log = random.Random(seed), logs[sid]
            for _ in range(rounds):
                extend(log, rng.randint(1, 5), tag=sid[:4])
                await store.commit(sid, log)
            return rounds

        commits = sum(await asyncio.gather(*(rollout(sid, i) for i, sid in enumerate(ids))))
        for sid in ids:
            await assert_stored(store, sid, list(logs[sid]))
        assert store.stats().transactions < commits  # commits that arrived together were grouped


def _unserializable(log: EventLog) -> EventLog:
    log.append("note", {"bad": object()})
    return log
