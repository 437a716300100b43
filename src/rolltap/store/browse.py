"""Pages of runs, sessions and tasks for a browser: filtered, sorted and paged in SQL.

Every function issues a fixed number of queries whatever the run's size and holds one
page in memory (sessions' task documents and events are never read here). Pages are
``offset``/``limit``; each says whether another follows (``limit + 1`` rows fetched).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.aggregate import run_r, run_summaries, stored_summary
from rolltap.store.attempt_read import retried, slot_summary
from rolltap.store.lease import effective_status, run_status_filter
from rolltap.store.models import RunInfo
from rolltap.store.reader import run_info
from rolltap.store.rollup import NO_TASK
from rolltap.store.rollup_read import read_run_stats
from rolltap.store.schema import leases, runs, sessions, task_stats

__all__ = [
    "SESSION_SORTS",
    "RunRow",
    "SessionFilter",
    "SessionRow",
    "TaskRow",
    "runs_page",
    "sessions_page",
    "task_rows",
    "tasks_page",
]

#: what a run's sessions sort on (each indexed with ``run_id``)
SESSION_SORTS: dict[str, ColumnElement[Any]] = {
    "created": sessions.c.created_at,
    "reward": sessions.c.reward,
    "duration": sessions.c.duration_s,
    "prompt_tokens": sessions.c.prompt_tokens,
    "completion_tokens": sessions.c.completion_tokens,
    "task": sessions.c.task_id,
    "status": sessions.c.status,
    "error": sessions.c.error_code,
}


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run with its summary (stored by its owner, else computed in SQL)."""

    info: RunInfo
    summary: dict[str, Any]
    stored: bool


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One rollout as a run's table shows it (status as readers see it)."""

    id: str
    task_id: str | None
    status: str
    reward: float | None
    error_code: str | None
    error_message: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    duration_s: float | None
    created_at: float
    n_events: int
    #: which attempt of its (task, sample) it is, and the session it repeats
    attempt: int = 0
    retry_of: str | None = None


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One task of a run: its rollouts, how many were rewarded and passed, mean reward."""

    task_id: str | None
    rollouts: int
    rewarded: int
    passed: int
    mean_reward: float | None


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """What a run's sessions are narrowed to; None leaves a field out."""

    status: str | None = None
    error_code: str | None = None
    task_id: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    #: an id prefix, or part of a task id
    search: str | None = None

    def clauses(self, expired: bool) -> list[ColumnElement[bool]]:
        """WHERE clauses over one run's sessions, its lease ``expired`` or not."""
        c = sessions.c
        out: list[ColumnElement[bool]] = []
        if self.status:
            out.append(run_status_filter(self.status, expired))
        if self.error_code:
            out.append(c.error_code == self.error_code)
        if self.task_id:
            out.append(c.task_id == self.task_id)
        if self.reward_min is not None:
            out.append(c.reward >= self.reward_min)
        if self.reward_max is not None:
            out.append(c.reward <= self.reward_max)
        if self.search:
            escaped = self.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            out.append(
                or_(
                    c.id.like(f"{escaped}%", escape="\\"),
                    c.task_id.like(f"%{escaped}%", escape="\\"),
                )
            )
        return out


def _page(query: Select[Any], offset: int, limit: int) -> Select[Any]:
    return query.offset(max(offset, 0)).limit(max(limit, 1) + 1)


async def runs_page(
    conn: AsyncConnection, *, offset: int = 0, limit: int = 50, search: str | None = None,
    now: float | None = None,
) -> tuple[list[RunRow], bool]:  # fmt: skip
    """Runs, newest first, each with its summary; whether more follow. At most four
    queries: the page, its runs' interrupted counts, then the aggregates of every run on
    it without a stored summary (and, for each such run that was retried, its sessions)."""
    now = time.time() if now is None else now
    query = select(runs).order_by(runs.c.created_at.desc(), runs.c.id.desc())
    if search:
        query = query.where(or_(runs.c.id.startswith(search), runs.c.name.contains(search)))
    found = list((await conn.execute(_page(query, offset, limit))).mappings())
    more = len(found) > limit
    found = found[:limit]
    counts = await read_run_stats(conn, [row["id"] for row in found], now)
    infos = {row["id"]: run_info(row, counts[row["id"]].interrupted()) for row in found}
    stored = {row["id"]: stored_summary(row["summary"]) for row in found}
    missing = {
        rid: (infos[rid].n_sessions, run_r(infos[rid].config))
        for rid, doc in stored.items()
        if doc is None and not retried(infos[rid].config)
    }
    computed = await run_summaries(conn, missing, now)
    for rid, doc in stored.items():
        if doc is None and rid not in missing:
            config = infos[rid].config
            computed[rid] = await slot_summary(conn, rid, config, run_r(config))
    rows = []
    for rid, info in infos.items():
        doc = stored[rid]
        rows.append(RunRow(info, doc if doc is not None else computed[rid], doc is not None))
    return rows, more


def _session_query(run_id: str) -> Select[Any]:
    c = sessions.c
    return select(
        c.id, c.task_id, c.status, c.reward, c.error_code, c.error_message,
        c.prompt_tokens, c.completion_tokens, c.duration_s, c.created_at, c.n_events,
        c.attempt, c.retry_of,
    ).where(c.run_id == run_id)  # fmt: skip


async def _lease_expiry(conn: AsyncConnection, run_id: str) -> float | None:
    return await conn.scalar(select(leases.c.expires_at).where(leases.c.run_id == run_id))


async def sessions_page(
    conn: AsyncConnection, run_id: str, flt: SessionFilter = SessionFilter(), *,
    sort: str = "created", desc: bool = False, offset: int = 0, limit: int = 50,
) -> tuple[list[SessionRow], bool]:  # fmt: skip
    """One page of a run's sessions, filtered and sorted; whether more follow. Two
    queries: the run's lease, then the page (no join: the run's indexes serve it)."""
    now = time.time()
    expires_at = await _lease_expiry(conn, run_id)
    expired = expires_at is not None and expires_at < now
    column = SESSION_SORTS.get(sort, sessions.c.created_at)
    order = (column.desc(), sessions.c.id.desc()) if desc else (column, sessions.c.id)
    query = _session_query(run_id).where(*flt.clauses(expired)).order_by(*order)
    rows = list(await conn.execute(_page(query, offset, limit)))
    page = [
        SessionRow(
            id=r.id,
            task_id=r.task_id,
            status=effective_status(r.status, expires_at, now),
            reward=r.reward,
            error_code=r.error_code,
            error_message=r.error_message,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            duration_s=r.duration_s,
            created_at=r.created_at,
            n_events=r.n_events,
            attempt=r.attempt or 0,
            retry_of=r.retry_of,
        )
        for r in rows[:limit]
    ]
    return page, len(rows) > limit


def _task_query(run_id: str) -> Select[Any]:
    t = task_stats.c
    return select(t.task_key, t.rollouts, t.rewarded, t.passed, t.reward_sum).where(
        t.run_id == run_id, t.rollouts > 0
    )


def _task_row(row: Any) -> TaskRow:
    key, n, rewarded, passed, total = row
    mean = float(total) / rewarded if rewarded else None
    return TaskRow(key if key != NO_TASK else None, int(n), int(rewarded), int(passed), mean)


async def tasks_page(
    conn: AsyncConnection, run_id: str, *, offset: int = 0, limit: int = 50
) -> tuple[list[TaskRow], bool]:
    """One page of a run's tasks by task id (from its aggregates); whether more follow.
    One query."""
    query = _task_query(run_id).order_by(task_stats.c.task_key)
    rows = [_task_row(r) for r in await conn.execute(_page(query, offset, limit))]
    return rows[:limit], len(rows) > limit


async def task_rows(
    conn: AsyncConnection, run_id: str, task_ids: Sequence[str | None]
) -> dict[str | None, TaskRow]:
    """Run ``run_id``'s rows for ``task_ids`` (to compare runs task by task). One query."""
    named = [t for t in task_ids if t is not None]
    if not named:
        return {}
    query = _task_query(run_id).where(task_stats.c.task_key.in_(named))
    return {row.task_id: row for row in map(_task_row, await conn.execute(query))}
