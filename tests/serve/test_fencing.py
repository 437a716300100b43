"""A worker presumed lost may still be alive: its late writes are refused, never mixed in.

When the supervisor (or the eval driver) ends a lost worker's rollout ``worker_lost``, it
appends that status to what the worker had committed. A worker that was only cut off
(an unreachable Ray node, a stalled loop) and wakes up later still holds its view of the
session's history, which is now stale: each of its later commits and creates is refused
by the store, on every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rolltap.events import EventKind, EventLog
from rolltap.rollouts.tasks import Task
from rolltap.serve.outcomes import store_lost
from rolltap.store import Store, StoreConflictError
from serve.conftest import upgraded_database

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fence.db'}"
        return
    yield from upgraded_database(request.param)


async def test_a_lost_workers_late_commits_are_refused(url: str) -> None:
    task = Task(id="t0", prompt="hi")
    async with await Store.open(url, upgrade=True) as driver, await Store.open(url) as zombie:
        run = await driver.create_run("fence", {})
        session = await zombie.create_session(run.id, session_id="s" * 32, task={"task_id": "t0"})
        log = EventLog()
        log.append(EventKind.MODEL_REQUEST, {"n": 1})
        await zombie.commit(session.id, log)
        # the worker is presumed lost: its rollout is ended for it
        await store_lost(
            driver, run_id=run.id, session_id=session.id, task=task, sample=0, user=None,
            status="worker_lost", error="worker 0 missed its heartbeat",
        )  # fmt: skip
        # ... and it wakes up: its next commit, and its final one, are refused
        log.append(EventKind.MODEL_RESPONSE, {"n": 2})
        with pytest.raises(StoreConflictError):
            await zombie.commit(session.id, log)
        log.append(EventKind.STATUS, {"status": "completed", "error": None, "limit": None})
        with pytest.raises(StoreConflictError):
            await zombie.commit(session.id, log, status="completed", reward=1.0)
        # a rollout it was given but had not started yet: its session exists already
        await store_lost(
            driver, run_id=run.id, session_id="u" * 32, task=task, sample=1, user=None,
            status="worker_lost", error="worker 0 missed its heartbeat",
        )  # fmt: skip
        with pytest.raises(StoreConflictError):
            await zombie.create_session(run.id, session_id="u" * 32, task={"task_id": "t0"})
        stored = await driver.get_session(session.id)
        events = list(await driver.load_log(session.id))
    assert stored.status == "worker_lost" and stored.reward is None
    assert [e.kind for e in events] == [EventKind.MODEL_REQUEST, EventKind.STATUS]
    assert events[-1].payload["status"] == "worker_lost"
