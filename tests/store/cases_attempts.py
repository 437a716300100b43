"""A session's ``attempt`` and ``retry_of`` (``rolltap eval --retry-failed``): every read
path, export and import, the checks, and a retried run's summary by its attempt policy."""

from __future__ import annotations

import io
import re
from typing import Any

import aiohttp
import orjson
import pytest

from rolltap.events import EventKind, EventLog
from rolltap.exports import export_jsonl, import_jsonl
from rolltap.store import (
    SessionInfo,
    Store,
    StoreValidationError,
    reading,
    retried_by,
    runs_page,
    sessions_page,
)
from rolltap.view import ViewConfig, ViewServer
from store.storekit import count_statements


async def _pages(store: Store, *paths: str) -> list[str]:
    async with ViewServer(store, ViewConfig(port=0)) as server, aiohttp.ClientSession() as http:
        texts = []
        for path in paths:
            async with http.get(f"{server.url}{path}") as resp:
                assert resp.status == 200, path
                texts.append(await resp.text())
        return texts


def _link(info: SessionInfo) -> tuple[int, str | None]:
    return info.attempt, info.retry_of


def _slot(task: str, sample: int = 0) -> dict[str, Any]:
    return {"task_id": task, "sample": sample, "task": {"id": task, "prompt": "p"}}


async def _end(store: Store, session_id: str, status: str, reward: float | None,
               code: str | None = None) -> None:  # fmt: skip
    log = EventLog()
    if code is not None:
        log.append(EventKind.MODEL_ERROR, {"code": code, "message": f"{code}!"})
    log.append(EventKind.STATUS, {"status": status})
    await store.commit(session_id, log, status=status, reward=reward)


async def _retried_run(store: Store) -> tuple[str, dict[str, SessionInfo]]:
    """A run of two slots: t0 failed (0.0), then its retry's reward crashed (error, no
    reward); t1 completed (1.0). best counts t0's first attempt, last its second."""
    run = await store.create_run("retried", {"run": {"r": 1}})
    first = await store.create_session(run.id, task=_slot("t0"))
    await _end(store, first.id, "failed", 0.0, "upstream_http_error")
    other = await store.create_session(run.id, task=_slot("t1"))
    await _end(store, other.id, "completed", 1.0)
    again = await store.create_session(run.id, task=_slot("t0"), attempt=1, retry_of=first.id)
    log = EventLog()
    log.append(EventKind.STATUS, {"status": "error", "error_code": "reward_error"})
    await store.commit(again.id, log, status="error")
    return run.id, {"first": first, "other": other, "again": again}


class AttemptCases:
    async def test_a_session_keeps_its_attempt_and_the_session_it_repeats(
        self, store: Store
    ) -> None:
        run = await store.create_run("r")
        first = await store.create_session(run.id, task=_slot("t"))
        again = await store.create_session(run.id, task=_slot("t"), attempt=1, retry_of=first.id)
        third = await store.create_session(run.id, task=_slot("t"), attempt=2, retry_of=again.id)
        want = {first.id: (0, None), again.id: (1, first.id), third.id: (2, again.id)}
        assert {s.id: _link(s) for s in (first, again, third)} == want
        assert {s: _link(await store.get_session(s)) for s in want} == want
        assert {s.id: _link(s) for s in await store.list_sessions(run.id)} == want
        assert (await store.get_session(again.id)).to_dict()["retry_of"] == first.id
        async with reading(store.engine) as conn:
            page, _ = await sessions_page(conn, run.id)
            assert {row.id: (row.attempt, row.retry_of) for row in page} == want
            assert await retried_by(conn, first.id) == [again.id]
            assert await retried_by(conn, third.id) == []
        assert {r.session_id: (r.attempt, r.retry_of) for r in await store.run_results(run.id)} == (
            want
        )

    @pytest.mark.parametrize(
        ("attempt", "retry_of", "says"),
        [(1, None, "names one"), (0, "s", "repeats no"), (-1, "s", "integer"),
         (True, "s", "integer"), (1, "x" * 65, "retry_of session id")],
    )  # fmt: skip
    async def test_a_bad_attempt_is_refused(
        self, store: Store, attempt: Any, retry_of: str | None, says: str
    ) -> None:
        run = await store.create_run("r")
        with pytest.raises(StoreValidationError, match=says):
            await store.create_session(run.id, attempt=attempt, retry_of=retry_of)
        assert await store.list_sessions(run.id) == []

    async def test_export_and_import_carry_attempts_and_older_files_still_import(
        self, store: Store
    ) -> None:
        run_id, made = await _retried_run(store)
        out = io.BytesIO()
        assert await export_jsonl(store, out, run=run_id) == 3
        lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
        by_id = {line["session"]["id"]: line for line in lines}
        assert by_id[made["again"].id]["session"]["retry_of"] == made["first"].id
        await store.delete_run(run_id)
        for line in lines:  # a file written before attempts: no such keys
            if line["session"]["id"] != made["again"].id:
                del line["session"]["attempt"], line["session"]["retry_of"]
        data = b"\n".join(orjson.dumps(line) for line in lines)
        assert await import_jsonl(store, io.BytesIO(data)) == 3
        back = {s.id: _link(s) for s in await store.list_sessions(run_id)}
        assert back == {made["first"].id: (0, None), made["other"].id: (0, None),
                        made["again"].id: (1, made["first"].id)}  # fmt: skip
        # a later attempt that names no session it repeats (export order is by id: pick it)
        plain = next(line for line in lines if line["session"]["id"] == made["first"].id)
        bad = orjson.dumps({**plain, "session": {**plain["session"], "attempt": 3}})
        with pytest.raises(StoreValidationError, match="line 1: attempt 0 repeats"):
            await import_jsonl(store, io.BytesIO(bad), skip_existing=True)

    async def test_run_results_read_each_session_from_its_row(self, store: Store) -> None:
        run_id, made = await _retried_run(store)
        results = {r.session_id: r for r in await store.run_results(run_id)}
        first, again = results[made["first"].id], results[made["again"].id]
        assert (first.task_id, first.sample, first.status, first.reward) == ("t0", 0, "failed", 0.0)
        assert (first.error_code, first.error_message) == (
            "upstream_http_error",
            "upstream_http_error!",
        )
        assert (again.status, again.reward, again.error_code) == ("error", None, "reward_error")

    async def test_a_retried_run_is_summarized_by_its_attempt_policy(self, store: Store) -> None:
        run_id, _ = await _retried_run(store)
        await store.write_run_summary(run_id, {"stale": True})
        # counted by the rollups (every session) until the run says it was retried
        await store.record_retry(run_id, policy="best", codes=None, slots=1)
        best = await store.run_summary(run_id)
        assert best["stored"] is False  # the retry cleared the summary stored before
        assert (best["rollouts"], best["statuses"]) == (2, {"completed": 1, "failed": 1})
        assert best["reward"]["mean"] == 0.5 and list(best["errors"]) == ["upstream_http_error"]
        assert best["attempts"] == {
            "policy": "best", "sessions": 3, "slots": 2, "retried": 1, "max_attempt": 1,
        }  # fmt: skip
        assert best["model_calls"] is None  # what only events say
        await store.record_retry(run_id, policy="last", codes=["reward_error"], slots=1)
        last = await store.run_summary(run_id)
        assert (last["rollouts"], last["statuses"]) == (2, {"completed": 1, "error": 1})
        assert last["reward"]["mean"] == 1.0 and list(last["errors"]) == ["reward_error"]
        info = await store.get_run(run_id)
        assert info.retries == 2 and info.to_dict()["retries"] == 2
        assert info.config["run"] == {
            "r": 1,
            "attempt_policy": "last",
            "retry_codes": ["reward_error"],
        }
        assert [p["slots"] for p in info.config["retries"]] == [1, 1]
        async with reading(store.engine) as conn:
            (row,), _ = await runs_page(conn)
        assert row.summary["statuses"] == last["statuses"] and not row.stored
        await store.write_run_summary(run_id, {**last, "mine": 1})
        assert (await store.run_summary(run_id))["mine"] == 1  # a stored one wins, as ever

    async def test_a_run_never_retried_reads_its_rollups_only(self, store: Store) -> None:
        run = await store.create_run("plain", {"run": {"r": 1}})
        for i in range(3):
            session = await store.create_session(run.id, task=_slot(f"t{i}"))
            await _end(store, session.id, "completed", 1.0)
        with count_statements(store) as seen:
            summary = await store.run_summary(run.id)
        assert "attempts" not in summary and summary["rollouts"] == 3
        # no statement reads the sessions table: the run's aggregates say it all
        assert not [s for s, _p, _m in seen.seen if "FROM rolltap_sessions" in s]

    async def test_the_viewer_shows_attempts_and_links_them(self, store: Store) -> None:
        run_id, made = await _retried_run(store)
        first, again = made["first"].id, made["again"].id
        plain, *_ = await _pages(store, f"runs/{run_id}")
        assert 'class="retry-of"' not in plain and "<th>attempt</th>" not in plain
        await store.record_retry(run_id, policy="last", codes=None, slots=1)
        run, later, earlier = await _pages(
            store, f"runs/{run_id}", f"sessions/{again}", f"sessions/{first}"
        )
        said = re.search(r'id="sum-attempts">([^<]*)<', run)
        assert said is not None
        assert said.group(1).strip() == "1 of 2 rollouts retried, 3 sessions, up to attempt 1"
        assert "the summary counts the last attempt of each" in run
        assert run.count('class="retry-of"') == 1 and f'href="/sessions/{first}"' in run
        assert re.search(r'id="rollout-attempt">1, a retry of <a id="retry-of" href="/sessions/'
                         + first, later)  # fmt: skip
        assert re.search(r'id="retried-by"><a href="/sessions/' + again, earlier)
        assert 'id="rollout-attempt"' not in earlier and 'id="retried-by"' not in later
