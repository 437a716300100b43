"""Sessions' derived columns, run summaries in SQL and stored, and migration 0003's backfill."""

from __future__ import annotations

import itertools
import logging
import math
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.events import EventKind, EventLog
from rolltap.results.rollout import RolloutResult
from rolltap.results.summary import summarize
from rolltap.store import SchemaVersionError, Store, upgrade
from rolltap.store.rollup import Facts, Rollup
from rolltap.store.rollup_sql import apply_rollup, rebuild_rollups
from rolltap.store.schema import run_stats, sessions
from rolltap.store.url import backend_of, to_sqlalchemy_url
from store.storekit import aggregates


def _response(log: EventLog, prompt: int, completion: int, ts: float) -> None:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    log.append(EventKind.MODEL_RESPONSE, {"intercept_id": "i", "usage": usage}, ts=ts)


async def _row(store: Store, session_id: str) -> dict[str, Any]:
    async with store.engine.connect() as conn:
        query = sa.select(sessions).where(sessions.c.id == session_id)
        return dict((await conn.execute(query)).mappings().one())


def _ended(log: EventLog, status: str, ts: float, **extra: Any) -> None:
    log.append(EventKind.STATUS, {"status": status, **extra}, ts=ts)


def _upsert_cache_tags(records: list[logging.LogRecord]) -> list[str]:
    """What SQLAlchemy's echo said of each rollup upsert's compiled form: the tag of the
    parameters line that follows the statement (``[generated in …]``, ``[cached since …]``,
    ``[no key …]``: "Estimating Cache Performance Using Logging" in its docs)."""
    messages = [record.getMessage() for record in records]
    return [
        after.split("]")[0] + "]"
        for message, after in itertools.pairwise(messages)
        if message.startswith("INSERT INTO rolltap_") and "_stats" in message.split("(")[0]
    ]


class SummaryCases:
    async def test_rollup_upserts_are_compiled_once(
        self, store: Store, store_url: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        # SQLAlchemy 2.0 gives the dialects' upsert constructs no cache key (compiled at
        # every execution: a tenth of a --workers driver's CPU); the rollups' upserts must
        # come from its compiled cache after their first use
        run = await store.create_run("r")
        row = {"run_id": run.id, "task_id": "t", "status": "failed", "created_at": 1.0,
               "reward": 0.5, "error_code": "upstream_timeout", "error_message": "slow",
               "prompt_tokens": 3, "completion_tokens": 2, "duration_s": 1.5}  # fmt: skip
        caplog.set_level(logging.INFO, logger="sqlalchemy.engine.Engine")
        engine = create_async_engine(to_sqlalchemy_url(store_url))
        try:
            for _ in range(3):
                rollup = Rollup()
                rollup.add(Facts.of_row(row))
                async with engine.begin() as conn:
                    await apply_rollup(conn, rollup)
        finally:
            await engine.dispose()
        tags = _upsert_cache_tags(caplog.records)
        assert len(tags) == 6, tags  # two upserts (tasks, stats) a rollup
        assert [tag.startswith("[cached since") for tag in tags[2:]] == [True] * 4, tags
        async with store.engine.connect() as conn:
            query = sa.select(run_stats.c.n).where(
                run_stats.c.run_id == run.id, run_stats.c.stat == "error"
            )
            assert (await conn.execute(query)).scalar_one() == 3

    async def test_commits_keep_tokens_duration_task_and_error_columns(self, store: Store) -> None:
        run = await store.create_run("r")
        session = await store.create_session(run.id, task={"task_id": "t7", "sample": 0})
        log = EventLog()
        log.append(EventKind.STATUS, {"status": "running"}, ts=100.0)
        _response(log, 10, 3, 101.0)
        await store.commit(session.id, log, status="running")
        _response(log, 20, 4, 102.5)  # counted incrementally: only the new event is read
        log.append(EventKind.MODEL_ERROR, {"code": "upstream_timeout", "message": "slow"}, ts=104.0)
        _ended(log, "failed", 105.0, error="TimeoutError: x")
        await store.commit(session.id, log, status="failed", reward=0.0)
        row = await _row(store, session.id)
        assert (row["task_id"], row["prompt_tokens"], row["completion_tokens"]) == ("t7", 30, 7)
        assert math.isclose(row["duration_s"], 5.0)
        assert (row["error_code"], row["error_message"]) == ("upstream_timeout", "slow")
        store.forget(session.id)  # another process: the totals are recounted from the log
        log.truncate(2)  # a rewritten history replaces the counts too
        _ended(log, "completed", 103.0)
        await store.commit(session.id, log, status="completed", reward=1.0)
        row = await _row(store, session.id)
        assert (row["prompt_tokens"], row["completion_tokens"], row["error_code"]) == (10, 3, None)
        assert math.isclose(row["duration_s"], 3.0)

    async def test_the_status_events_code_names_the_failure(self, store: Store) -> None:
        run = await store.create_run("r")
        named, harness = [await store.create_session(run.id) for _ in range(2)]
        log = EventLog()
        log.append(EventKind.MODEL_ERROR, {"code": "upstream_timeout", "message": "slow"})
        _ended(log, "error", 1.0, error="reward: boom", error_code="reward_error",
               error_message="reward: ValueError: boom")  # fmt: skip
        await store.commit(named.id, log, status="error")
        row = await _row(store, named.id)
        assert (row["error_code"], row["error_message"]) == (
            "reward_error", "reward: ValueError: boom",
        )  # fmt: skip
        other = EventLog()
        _ended(other, "failed", 1.0, error="RuntimeError: harness bug")
        await store.commit(harness.id, other, status="failed")
        row = await _row(store, harness.id)
        assert (row["error_code"], row["error_message"]) == (
            "harness_error", "RuntimeError: harness bug",
        )  # fmt: skip

    async def test_the_sql_summary_is_evals_summary(self, store: Store) -> None:
        run = await store.create_run("r", {"run": {"r": 2}})
        plan = [("a", "completed", 1.0), ("a", "completed", 0.0), ("b", "completed", 1.0),
                ("b", "failed", 0.0), ("c", "cancelled", None)]  # fmt: skip
        results = []
        for i, (task, status, reward) in enumerate(plan):
            s = await store.create_session(run.id, task={"task_id": task, "sample": i % 2})
            log = EventLog()
            _response(log, 5, 2, 10.0 + i)
            if status == "failed":
                log.append(EventKind.MODEL_ERROR, {"code": "upstream_http_error", "message": "500"})
            _ended(log, status, 12.0 + 2 * i)
            await store.commit(s.id, log, status=status, reward=reward)
            results.append(RolloutResult(task, i % 2, s.id, status, reward=reward))
        expected = summarize(results, r=2)
        got = await store.run_summary(run.id)
        assert got["stored"] is False
        assert (got["rollouts"], got["statuses"]) == (expected["rollouts"], expected["statuses"])
        assert got["reward"]["n"] == expected["reward"]["n"]
        assert math.isclose(got["reward"]["mean"], expected["reward"]["mean"])
        for mine, theirs in zip(got["reward"]["ci95"], expected["reward"]["ci95"], strict=True):
            assert math.isclose(mine, theirs, rel_tol=1e-9)
        assert got["pass_at_k"].keys() == expected["pass_at_k"].keys()
        for k, v in expected["pass_at_k"].items():
            assert math.isclose(got["pass_at_k"][k], v)
        assert got["errors"] == {"upstream_http_error": {"count": 1, "first_message": "500"}}
        assert got["tokens"] == {"prompt": 25, "completion": 10}
        assert sum(got["histograms"]["reward"]["counts"]) == 4  # the cancelled one has none
        assert got["histograms"]["tokens"]["counts"] == [5]  # every rollout had 7 tokens

    async def test_a_stored_summary_is_read_until_a_commit_changes_the_run(
        self, store: Store
    ) -> None:
        run = await store.create_run("r")
        s = await store.create_session(run.id)
        log = EventLog()
        _ended(log, "completed", 1.0)
        await store.commit(s.id, log, status="completed", reward=1.0)
        await store.write_run_summary(run.id, {"rollouts": 1, "latency_ms": {"p50": 12.0}})
        got = await store.run_summary(run.id)
        assert (got["stored"], got["latency_ms"], got["rollouts"]) == (True, {"p50": 12.0}, 1)
        assert got["histograms"]["reward"]["counts"] == [1] and "token" not in got
        await store.create_session(run.id)  # the run changed: its summary no longer holds
        got = await store.run_summary(run.id)
        assert (got["stored"], got["rollouts"], got["statuses"]) == (
            False, 2, {"completed": 1, "pending": 1},
        )  # fmt: skip

    async def test_aggregates_kept_by_writes_equal_a_recount(self, store: Store) -> None:
        run = await store.create_run("agg", {"run": {"r": 2}})
        plan = [("a", 1.0), ("a", 0.0), ("b", 1.0), (None, 1.0), (None, None), ("c", None)]
        ids = []
        for i, (task, reward) in enumerate(plan):
            s = await store.create_session(run.id, task={"task_id": task} if task else {})
            ids.append(s.id)
            log = EventLog()
            _response(log, 3 + i, 1, 10.0)
            if reward == 0.0:
                log.append(EventKind.MODEL_ERROR, {"code": "upstream_timeout", "message": "m"})
            _ended(log, "failed" if reward == 0.0 else "completed", 11.0 + i)
            await store.commit(s.id, log, status="running")  # counted, then moved
            await store.commit(s.id, log, status="failed" if reward == 0.0 else "completed",
                               reward=reward)  # fmt: skip
        await store.commit(ids[0], await store.load_log(ids[0]), reward=0.5)  # a changed reward
        await store.create_session(run.id, task={"task_id": "a"})  # pending
        kept = await aggregates(store, run.id)
        async with store.engine.begin() as conn:
            await rebuild_rollups(conn, [run.id])
        assert kept == await aggregates(store, run.id)
        await store.delete_session(ids[2])  # b's only rollout: its task empties
        summary = await store.run_summary(run.id)
        assert summary["statuses"] == {"completed": 4, "failed": 1, "pending": 1}
        assert summary["errors"] == {"upstream_timeout": {"count": 1, "first_message": "m"}}
        # a: rewards 0.5, 0.0 (none passed); task-less: 1.0 passed; c: no reward
        assert summary["pass_at_k"]["pass@1"] == pytest.approx(1 / 2)

    async def test_migration_0003_backfills_older_sessions(self, store_url: str) -> None:
        await upgrade(store_url, "0002")
        await fill_at_0002(store_url)
        if backend_of(to_sqlalchemy_url(store_url)) != "sqlite":
            with pytest.raises(SchemaVersionError, match="rolltap db upgrade"):
                await Store.open(store_url)
            await upgrade(store_url)
        async with await Store.open(store_url) as store:  # SQLite upgrades itself
            base, fork = await _row(store, "base"), await _row(store, "fork")
            summary = await store.run_summary("run")
        assert (base["task_id"], base["prompt_tokens"], base["error_code"]) == ("t1", 8, None)
        assert (fork["prompt_tokens"], fork["completion_tokens"]) == (8 + 4, 2 + 1)
        assert (fork["error_code"], fork["error_message"]) == ("upstream_timeout", "slow")
        assert math.isclose(fork["duration_s"], 9.0)  # from the parent's first event
        assert summary["errors"]["upstream_timeout"]["count"] == 1
        # migration 0004 counted them into the run's aggregates
        assert (summary["statuses"], summary["tokens"]) == (
            {"completed": 1, "failed": 1}, {"prompt": 20, "completion": 5},
        )  # fmt: skip


async def fill_at_0002(url: str) -> None:
    """A run with a session and its fork, written as a rolltap at schema 0002 wrote them."""
    runs_t = sa.table("rolltap_runs", *(sa.column(c) for c in (
        "id", "name", "config", "created_at", "n_sessions", "n_finished", "n_failed",
        "n_rewarded", "reward_sum")))  # fmt: skip
    sessions_t = sa.table("rolltap_sessions", *(sa.column(c) for c in (
        "id", "run_id", "task", "status", "created_at", "updated_at", "n_events", "reward",
        "parent_id", "fork_at")))  # fmt: skip
    events_t = sa.table("rolltap_events", *(sa.column(c) for c in (
        "session_id", "seq", "kind", "ts", "payload")))  # fmt: skip

    def ev(sid: str, seq: int, kind: str, ts: float, payload: dict[str, Any]) -> dict[str, Any]:
        return {"session_id": sid, "seq": seq, "kind": kind, "ts": ts,
                "payload": orjson.dumps(payload)}  # fmt: skip

    usage = {"usage": {"prompt_tokens": 8, "completion_tokens": 2}}
    engine = create_async_engine(to_sqlalchemy_url(url))
    try:
        async with engine.begin() as conn:
            await conn.execute(runs_t.insert().values(
                id="run", name="old", config="{}", created_at=1.0, n_sessions=2, n_finished=2,
                n_failed=1, n_rewarded=1, reward_sum=1.0))  # fmt: skip
            common = {"run_id": "run", "created_at": 1.0, "updated_at": 2.0}
            await conn.execute(sessions_t.insert(), [
                {**common, "id": "base", "task": '{"task_id": "t1"}', "status": "completed",
                 "n_events": 3, "reward": 1.0, "parent_id": None, "fork_at": None},
                {**common, "id": "fork", "task": "{}", "status": "failed", "n_events": 4,
                 "reward": None, "parent_id": "base", "fork_at": 2},
            ])  # fmt: skip
            await conn.execute(events_t.insert(), [
                ev("base", 0, "status", 10.0, {"status": "running"}),
                ev("base", 1, "model_response", 11.0, usage),
                ev("base", 2, "status", 12.0, {"status": "completed"}),
                ev("fork", 2, "model_response", 15.0,
                   {"usage": {"prompt_tokens": 4, "completion_tokens": 1}}),
                ev("fork", 3, "model_error", 19.0, {"code": "upstream_timeout", "message": "slow"}),
            ])  # fmt: skip
    finally:
        await engine.dispose()
