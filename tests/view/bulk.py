"""Runs of many sessions by bulk insert (tests and benchmarks/view.py): what the
viewer must page, sort, filter and summarize without reading them all."""

from __future__ import annotations

import random
import time
from typing import Any

import orjson
import sqlalchemy as sa

from rolltap.events import EventKind, EventLog
from rolltap.store import Store
from rolltap.store.rollup_sql import rebuild_rollups
from rolltap.store.schema import sessions

_STATUSES = ("completed",) * 6 + ("failed", "timeout", "limit_reached", "error")
_CHUNK = 5000


def _row(run_id: str, i: int, rng: random.Random, now: float) -> dict[str, Any]:
    status = rng.choice(_STATUSES)
    failed = status in ("failed", "timeout", "error")
    task = f"task-{i // 4:06d}"
    prompt, completion = rng.randint(50, 4000), rng.randint(5, 800)
    return {
        "id": f"{run_id[:8]}-{i:08d}", "run_id": run_id, "user_name": None,
        "task": orjson.dumps({"task_id": task, "sample": i % 4}).decode(),
        "status": status, "created_at": now + i * 1e-3, "updated_at": now + i * 1e-3 + 1,
        "n_events": 6, "reward": None if status == "error" else float(rng.random() < 0.4),
        "parent_id": None, "fork_at": None, "last_commit": None, "task_id": task,
        "error_code": ("upstream_timeout" if status == "timeout" else "harness_error")
        if failed else None,
        "error_message": "simulated" if failed else None,
        "prompt_tokens": prompt, "completion_tokens": completion,
        "duration_s": rng.uniform(0.2, 30.0),
    }  # fmt: skip


async def bulk_run(store: Store, n: int, *, seed: int = 0) -> tuple[str, str]:
    """A run of ``n`` sessions (4 samples a task, mixed statuses) and one session of it
    with real events; (run id, that session's id)."""
    rng = random.Random(seed)
    run = await store.create_run(f"bulk-{n}", {"run": {"r": 4, "harness": "chat", "model": "m"}})
    now = time.time()
    async with store.engine.begin() as conn:
        for start in range(0, n, _CHUNK):
            rows = [_row(run.id, i, rng, now) for i in range(start, min(n, start + _CHUNK))]
            await conn.execute(sessions.insert(), rows)
        await conn.execute(
            sa.update(sa.table("rolltap_runs", sa.column("id"), sa.column("n_sessions")))
            .where(sa.column("id") == run.id)
            .values(n_sessions=n)
        )
        await rebuild_rollups(conn, [run.id])  # what the writer keeps for each commit
    session = await store.create_session(run.id, task={"task_id": "extra"})
    log = EventLog()
    log.append(EventKind.MODEL_REQUEST, {"intercept_id": "i1", "dialect": "chat",
               "messages": [{"role": "user", "content": "hi"}], "params": {}})  # fmt: skip
    log.append(EventKind.MODEL_RESPONSE, {"intercept_id": "i1", "status": 200,
               "message": {"role": "assistant", "content": "hello"},
               "usage": {"prompt_tokens": 3, "completion_tokens": 2}})  # fmt: skip
    log.append(EventKind.STATUS, {"status": "completed"})
    await store.commit(session.id, log, status="completed", reward=1.0)
    return run.id, session.id
