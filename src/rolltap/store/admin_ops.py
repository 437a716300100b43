"""Writes other than event commits: creating runs and sessions, imports, deletions."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.results.statuses import FAILED_STATUSES, UNFINISHED_STATUSES
from rolltap.store.errors import ForkDependencyError, StoreNotFoundError, StoreValidationError
from rolltap.store.fence import check_fences
from rolltap.store.models import RunInfo, SessionInfo
from rolltap.store.ops import BatchApply, RunDelta, WriteOp, apply_run_deltas, rows_nbytes
from rolltap.store.reader import exists, fetch_session
from rolltap.store.rollup import NO_TASK, Facts, Rollup
from rolltap.store.rollup_sql import apply_rollup, drop_rollups, rebuild_rollups
from rolltap.store.schema import events, leases, runs, scores, scorings, sessions
from rolltap.store.serialize import dump_doc, row_event
from rolltap.store.session_columns import SessionMetrics, duration_of, task_id_of

__all__ = ["CreateRunOp", "CreateSessionOp", "DeleteRunOp", "DeleteSessionOp", "create_sessions"]

_CHUNK = 500


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


class CreateRunOp(WriteOp):
    def __init__(self, run: RunInfo) -> None:
        super().__init__()
        self.run = run

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        r = self.run
        await conn.execute(
            runs.insert().values(
                id=r.id, name=r.name, config=dump_doc(r.config), created_at=r.created_at,
                n_sessions=0, n_finished=0, n_failed=0, n_rewarded=0, reward_sum=0.0,
                set_id=r.set_id,
            )
        )  # fmt: skip

    def outcome(self) -> RunInfo:
        return self.run

    async def applied(self, conn: AsyncConnection) -> bool:
        return await exists(conn, runs, self.run.id)


class CreateSessionOp(WriteOp):
    """Insert a session (imported ones with their status, reward and events)."""

    def __init__(
        self,
        session: SessionInfo,
        *,
        rows: Sequence[dict[str, Any]] = (),
        on_success: Callable[[SessionInfo], None] | None = None,
        epoch: int | None = None,
    ) -> None:
        super().__init__()
        self.session, self.rows, self._on_success = session, rows, on_success
        #: the lease epoch of the run's owner creating it (None: not fenced)
        self.epoch = epoch
        self.nbytes = rows_nbytes(rows)

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        await create_sessions(conn, [self], now)

    def batched_by(self) -> BatchApply | None:
        """A new session of its own (no fork to resolve, no events imported: its row has
        the same columns as any such) is created together with such ones queued beside
        it (:func:`create_sessions`)."""
        return create_sessions if self.session.parent_id is None and not self.rows else None

    def row(self) -> dict[str, Any]:
        """Its ``sessions`` row."""
        s = self.session
        return dict(
            id=s.id, run_id=s.run_id, user_name=s.user, task=dump_doc(s.task),
            status=s.status, created_at=s.created_at, updated_at=s.updated_at,
            n_events=s.n_events, reward=s.reward, parent_id=s.parent_id,
            fork_at=s.fork_at, node_id=s.node_id, worker_id=s.worker_id,
            attempt=s.attempt or None, retry_of=s.retry_of,  # NULL: a first attempt
            last_commit=self.token, task_id=task_id_of(s.task), **self.derived,
        )  # fmt: skip

    @functools.cached_property
    def derived(self) -> dict[str, Any]:
        """An imported session's derived columns, counted from its rows (once)."""
        if not self.rows:
            return {}
        history = [row_event(r["seq"], r["kind"], r["ts"], r["payload"]) for r in self.rows]
        metrics = SessionMetrics.of(history)
        return metrics.columns(self.session.status, duration_of(history[0], history[-1]))

    async def resolve_fork(self, conn: AsyncConnection) -> None:
        """Point the fork at its parent's first ``fork_at`` events (checked)."""
        s = self.session
        assert s.parent_id is not None
        parent = await fetch_session(conn, s.parent_id)
        fork_at = parent.n_events if s.fork_at is None else s.fork_at
        if not 0 <= fork_at <= parent.n_events:
            raise StoreValidationError(
                f"fork_at {fork_at} outside parent {parent.id!r}'s {parent.n_events} events"
            )
        self.session = dataclasses.replace(
            s,
            n_events=fork_at,
            fork_at=fork_at if fork_at else None,
            parent_id=parent.id if fork_at else None,
        )

    def outcome(self) -> SessionInfo:
        return self.session

    async def applied(self, conn: AsyncConnection) -> bool:
        query = select(sessions.c.last_commit).where(sessions.c.id == self.session.id)
        return (await conn.scalar(query)) == self.token

    def on_success(self) -> None:
        if self._on_success is not None:
            self._on_success(self.session)


async def _descendants(conn: AsyncConnection, roots: Sequence[str]) -> list[str]:
    """Every session forked, directly or not, from one of ``roots``."""
    found: list[str] = []
    seen, level = set(roots), list(roots)
    while level:
        children: list[str] = []
        for chunk in _chunks(level):
            query = select(sessions.c.id).where(sessions.c.parent_id.in_(chunk))
            children.extend(i for i in (await conn.scalars(query)) if i not in seen)
        seen.update(children)
        found.extend(children)
        level = children
    return found


async def _delete_sessions(conn: AsyncConnection, ids: Sequence[str]) -> set[str]:
    """Delete sessions (a set closed under forking) and their events; their run ids."""
    run_ids: set[str] = set()
    for chunk in _chunks(ids):
        run_ids.update(
            await conn.scalars(select(sessions.c.run_id).where(sessions.c.id.in_(chunk)))
        )
        await conn.execute(sessions.update().where(sessions.c.id.in_(chunk)).values(parent_id=None))
    for chunk in _chunks(ids):
        await conn.execute(events.delete().where(events.c.session_id.in_(chunk)))
        await conn.execute(scores.delete().where(scores.c.session_id.in_(chunk)))
        await conn.execute(sessions.delete().where(sessions.c.id.in_(chunk)))
    return run_ids


async def _delete_scorings(conn: AsyncConnection, run_id: str) -> None:
    """Delete the run's scorings (``rolltap score``) and every score they hold."""
    theirs = select(scorings.c.id).where(scorings.c.run_id == run_id)
    await conn.execute(scores.delete().where(scores.c.scoring_id.in_(theirs)))
    await conn.execute(scorings.delete().where(scorings.c.run_id == run_id))


async def _recount(conn: AsyncConnection, run_ids: set[str]) -> None:
    """Recompute the counters of ``run_ids`` from their sessions (after deletions)."""
    s = sessions.c
    for run_id in sorted(run_ids):
        query = select(
            func.count(),
            func.coalesce(func.sum(case((s.status.not_in(UNFINISHED_STATUSES), 1), else_=0)), 0),
            func.coalesce(func.sum(case((s.status.in_(FAILED_STATUSES), 1), else_=0)), 0),
            func.count(s.reward),
            func.coalesce(func.sum(s.reward), 0.0),
        ).where(s.run_id == run_id)
        n, finished, failed, rewarded, total = (await conn.execute(query)).one()
        await conn.execute(
            runs.update().where(runs.c.id == run_id).values(
                n_sessions=n, n_finished=finished, n_failed=failed,
                n_rewarded=rewarded, reward_sum=float(total), summary=None,
            )
        )  # fmt: skip
    await rebuild_rollups(conn, run_ids)


async def create_sessions(
    conn: AsyncConnection, ops: Sequence[CreateSessionOp], now: float
) -> None:
    """Create ``ops``' sessions with one statement per table: a wave of thousands
    admitted at once (:meth:`CreateSessionOp.batched_by`) is a few statements, not a few
    per session. A batch with a bad op fails whole; the writer then applies each op
    alone, so only that one fails."""
    for run_id in sorted({op.session.run_id for op in ops}):
        if not await exists(conn, runs, run_id):
            raise StoreNotFoundError(f"no run {run_id!r}")
    await check_fences(conn, [(op.session.id, op.session.run_id, op.epoch) for op in ops])
    for op in ops:
        if op.session.parent_id is not None:
            await op.resolve_fork(conn)
    await conn.execute(sessions.insert(), [op.row() for op in ops])
    imported = [row for op in ops for row in op.rows]
    if imported:
        await conn.execute(events.insert(), imported)
    deltas: dict[str, RunDelta] = {}
    rollup = Rollup()
    for op in ops:
        s = op.session
        delta = deltas.setdefault(s.run_id, RunDelta())
        delta.sessions += 1
        delta.add_status(None, s.status)
        delta.add_reward(None, s.reward)
        task_id = task_id_of(s.task) or NO_TASK
        rollup.add(Facts(s.run_id, task_id, s.status, s.created_at, s.reward, **op.derived))
    await apply_run_deltas(conn, deltas)
    await apply_rollup(conn, rollup)


class DeleteSessionOp(WriteOp):
    """Delete a session; refused while forks depend on it unless ``cascade``."""

    def __init__(
        self, session_id: str, *, cascade: bool, forget: Callable[[list[str]], None]
    ) -> None:
        super().__init__()
        self.session_id, self.cascade, self._forget = session_id, cascade, forget
        self.deleted: list[str] = [session_id]

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        if not await exists(conn, sessions, self.session_id):
            raise StoreNotFoundError(f"no session {self.session_id!r}")
        forks = await _descendants(conn, [self.session_id])
        if forks and not self.cascade:
            raise ForkDependencyError(
                f"session {self.session_id!r} has {len(forks)} fork(s); delete with cascade"
            )
        self.deleted = [self.session_id, *forks]
        await _recount(conn, await _delete_sessions(conn, self.deleted))

    def outcome(self) -> list[str]:
        return self.deleted

    async def applied(self, conn: AsyncConnection) -> bool:
        return not await exists(conn, sessions, self.session_id)

    def on_success(self) -> None:
        self._forget(self.deleted)


class DeleteRunOp(WriteOp):
    """Delete a run, its sessions and their events (and, with ``cascade``, forks elsewhere)."""

    def __init__(
        self, run_id: str, *, cascade: bool, forget: Callable[[str, list[str]], None]
    ) -> None:
        super().__init__()
        self.run_id, self.cascade, self._forget = run_id, cascade, forget
        self.elsewhere: list[str] = []
        self.count = 0

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        if not await exists(conn, runs, self.run_id):
            raise StoreNotFoundError(f"no run {self.run_id!r}")
        inside = select(sessions.c.id).where(sessions.c.run_id == self.run_id)
        outside = select(sessions.c.id).where(
            sessions.c.parent_id.in_(inside), sessions.c.run_id != self.run_id
        )
        roots = list(await conn.scalars(outside))
        if roots and not self.cascade:
            raise ForkDependencyError(
                f"run {self.run_id!r}: {len(roots)} session(s) of other runs fork from it; "
                "delete with cascade"
            )
        self.elsewhere = [*roots, *await _descendants(conn, roots)]
        others = await _delete_sessions(conn, self.elsewhere)
        mine = sessions.c.run_id == self.run_id
        await conn.execute(sessions.update().where(mine).values(parent_id=None))
        await conn.execute(events.delete().where(events.c.session_id.in_(inside)))
        await _delete_scorings(conn, self.run_id)
        self.count = (await conn.execute(sessions.delete().where(mine))).rowcount
        await conn.execute(leases.delete().where(leases.c.run_id == self.run_id))
        await drop_rollups(conn, [self.run_id])
        await conn.execute(runs.delete().where(runs.c.id == self.run_id))
        await _recount(conn, others - {self.run_id})

    def outcome(self) -> int:
        return self.count + len(self.elsewhere)

    async def applied(self, conn: AsyncConnection) -> bool:
        return not await exists(conn, runs, self.run_id)

    def on_success(self) -> None:
        self._forget(self.run_id, self.elsewhere)
