"""Writes as objects the serial writer runs: the base class and the batched event commit.

Each :class:`WriteOp` can :meth:`~WriteOp.apply` itself inside the writer's transaction
and can tell whether it is already :meth:`~WriteOp.applied` — the writer asks after a
connection died with the outcome of a COMMIT unknown, so every write lands exactly once.
Consecutive ops that name the same :meth:`~WriteOp.batched_by` are applied together by it —
:class:`CommitOp` s by :func:`apply_commits`, new sessions by
:func:`~rolltap.store.admin_ops.create_sessions` — one batched statement per table for the
whole group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.errors import StoreError
from rolltap.events import Event, EventLog
from rolltap.results.statuses import is_failed, is_finished
from rolltap.store.errors import ForkDependencyError, StoreConflictError
from rolltap.store.fence import check_fences
from rolltap.store.models import CommitResult
from rolltap.store.rollup import Rollup
from rolltap.store.rollup_sql import apply_rollup, facts_of
from rolltap.store.schema import events, runs, sessions
from rolltap.store.serialize import event_rows
from rolltap.store.session_columns import SessionMetrics, duration_of

# commit tokens: unique per process (random prefix) and cheap (a counter)
_TOKENS = (f"{uuid.uuid4().hex[:16]}{n:016x}" for n in itertools.count())

__all__ = [
    "BatchApply",
    "CommitOp",
    "RunDelta",
    "SessionState",
    "WriteOp",
    "apply_commits",
    "apply_run_deltas",
    "rows_nbytes",
]


class WriteOp:
    """One write; the writer resolves :attr:`future` with its result once it is durable."""

    #: roughly what the write holds in memory until it lands (the writer's pending bytes)
    nbytes: int = 512

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        #: a token stored with the write, so a retry can tell whether it landed
        self.token = next(_TOKENS)

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        raise NotImplementedError

    def batched_by(self) -> BatchApply | None:
        """What applies this op together with the ops of the same batch queued right
        before or after it (None: it is applied alone, by :meth:`apply`)."""
        return None

    def outcome(self) -> Any:
        """What the caller gets once the write is durable."""
        return None

    async def applied(self, conn: AsyncConnection) -> bool:
        """Whether this write is already in the database (asked only on a retry)."""
        raise NotImplementedError

    def on_success(self) -> None:
        """Runs in the writer after the transaction committed, before the caller wakes."""

    def on_failure(self, error: StoreError) -> None:
        """Runs in the writer when the write failed (``error``) or its outcome is unknown."""


#: applies a group of ops in the writer's transaction: ``(conn, ops, now)``
BatchApply: TypeAlias = Callable[[AsyncConnection, Sequence[Any], float], Awaitable[None]]


@dataclass(slots=True)
class SessionState:
    """What the store remembers about a session it writes: the persisted prefix and more."""

    run_id: str
    prefix: int
    base: int
    parent_id: str | None
    status: str
    reward: float | None
    loaded: bool = True
    #: a commit found the stored history changed by another writer: refuse the rest
    conflicted: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    inflight: asyncio.Future[Any] | None = None
    #: totals over the persisted history (None: not known here; the next commit counts
    #: its whole log)
    metrics: SessionMetrics | None = None


@dataclass(slots=True)
class RunDelta:
    """Changes to a run's counters."""

    sessions: int = 0
    finished: int = 0
    failed: int = 0
    rewarded: int = 0
    reward_sum: float = 0.0

    def add_status(self, old: str | None, new: str | None) -> None:
        """Count the move of one session from status ``old`` to ``new`` (None: absent)."""
        self.finished += _flag(new, is_finished) - _flag(old, is_finished)
        self.failed += _flag(new, is_failed) - _flag(old, is_failed)

    def add(self, other: RunDelta) -> None:
        self.sessions += other.sessions
        self.finished += other.finished
        self.failed += other.failed
        self.rewarded += other.rewarded
        self.reward_sum += other.reward_sum

    def add_reward(self, old: float | None, new: float | None) -> None:
        self.rewarded += (new is not None) - (old is not None)
        self.reward_sum += (new or 0.0) - (old or 0.0)

    def is_zero(self) -> bool:
        return not (self.sessions or self.finished or self.failed or self.rewarded) and (
            self.reward_sum == 0.0
        )


def rows_nbytes(rows: Sequence[dict[str, Any]]) -> int:
    """What event rows hold in memory, roughly: their payload bytes plus a row's overhead."""
    return 512 + sum(len(row["payload"]) + 160 for row in rows)


def _flag(status: str | None, test: Any) -> int:
    return 1 if status is not None and test(status) else 0


_RUN_DELTA = (
    runs.update()
    .where(runs.c.id == bindparam("b_id"))
    .values(
        n_sessions=runs.c.n_sessions + bindparam("d_sessions"),
        n_finished=runs.c.n_finished + bindparam("d_finished"),
        n_failed=runs.c.n_failed + bindparam("d_failed"),
        n_rewarded=runs.c.n_rewarded + bindparam("d_rewarded"),
        reward_sum=runs.c.reward_sum + bindparam("d_reward_sum"),
        # the owner's stored summary no longer describes the run
        summary=None,
    )
)


async def apply_run_deltas(conn: AsyncConnection, deltas: dict[str, RunDelta]) -> None:
    """Add ``deltas`` to their runs' counters in one (executemany) statement."""
    params = [
        {
            "b_id": run_id,
            "d_sessions": d.sessions,
            "d_finished": d.finished,
            "d_failed": d.failed,
            "d_rewarded": d.rewarded,
            "d_reward_sum": d.reward_sum,
        }
        for run_id, d in deltas.items()
        if not d.is_zero()
    ]
    if params:
        await conn.execute(_RUN_DELTA, params)


class CommitOp(WriteOp):
    """Persist a session's new events (or its whole rewritten history) and counters.

    Built in one synchronous step from the log (snapshot, slice, serialization), so
    appends and truncations that race with the write are seen by the next commit.
    """

    def __init__(
        self,
        session_id: str,
        state: SessionState,
        log: EventLog,
        *,
        status: str | None,
        reward: float | None,
        epoch: int | None = None,
    ) -> None:
        super().__init__()
        self.session_id, self.state, self.log = session_id, state, log
        #: the lease epoch of the run's owner making this commit (None: not fenced)
        self.epoch = epoch
        self.snap = snap = log.snapshot(state.prefix)
        # a rewrite reaching below a fork point lowers it: events below stay the parent's
        self.base = min(state.base, snap.changed_from) if snap.replace else state.base
        self.parent_id = state.parent_id if self.base > 0 else None
        start = self.base if snap.replace else state.prefix
        if start < log.released:  # their messages are only in the store now
            raise StoreError(f"session {session_id}: events released from memory cannot be "
                             "written again")  # fmt: skip
        new = log.since(start)
        self.rows = event_rows(session_id, new)
        self.nbytes = rows_nbytes(self.rows)
        self.status = state.status if status is None else status
        self.reward = state.reward if reward is None else reward
        self.metrics = _metrics_after(state, log, new, replace=snap.replace)
        self.duration_s = duration_of(log[0], log[-1]) if snap.length else None

    @property
    def noop(self) -> bool:
        """Nothing to write: no new events, no rewrite, same status and reward."""
        return not (self.rows or self.snap.replace or self.counters_change())

    def counters_change(self) -> bool:
        """Whether status or reward change (and with them the run's counters)."""
        return self.status != self.state.status or self.reward != self.state.reward

    def outcome(self) -> CommitResult:
        return CommitResult(
            session_id=self.session_id,
            n_events=self.snap.length,
            written=len(self.rows),
            replaced=self.snap.replace,
            noop=False,
        )

    def derived(self) -> dict[str, Any]:
        """The session row's derived columns after this commit."""
        return self.metrics.columns(self.status, self.duration_s)

    def session_params(self, now: float) -> dict[str, Any]:
        derived = self.derived()
        return {
            **{f"b_{name}": value for name, value in derived.items()},
            "b_id": self.session_id,
            "b_n": self.snap.length,
            "b_status": self.status,
            "b_reward": self.reward,
            "b_now": now,
            "b_token": self.token,
            "b_fork_at": self.base if self.parent_id is not None else None,
            "b_parent": self.parent_id,
        }

    def run_delta(self) -> RunDelta:
        delta = RunDelta()
        delta.add_status(self.state.status, self.status)
        delta.add_reward(self.state.reward, self.reward)
        return delta

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        await apply_commits(conn, [self], now)

    def batched_by(self) -> BatchApply:
        return apply_commits

    async def applied(self, conn: AsyncConnection) -> bool:
        query = select(sessions.c.last_commit).where(sessions.c.id == self.session_id)
        return (await conn.scalar(query)) == self.token

    def on_success(self) -> None:
        st = self.state
        st.prefix, st.base, st.parent_id = self.snap.length, self.base, self.parent_id
        st.status, st.reward, st.metrics = self.status, self.reward, self.metrics
        self.log.mark_persisted(self.snap.epoch)

    def on_failure(self, error: StoreError) -> None:
        # the next commit reloads the prefix from the database: it is where it was,
        # unless the outcome was unknown — then the database says which it is
        self.state.loaded = False
        if type(error) is StoreConflictError:
            # the rows it appends exist already (not a refusal of its own rewrite, like
            # ForkDependencyError): someone else wrote the session since — a driver that
            # ended it worker_lost while this writer was cut off. This writer's view is
            # stale, and a reload would let its later commits mix into that history
            self.state.conflicted = True


_SESSION_UPDATE = (
    sessions.update()
    .where(sessions.c.id == bindparam("b_id"))
    .values(
        n_events=bindparam("b_n"),
        status=bindparam("b_status"),
        reward=bindparam("b_reward"),
        updated_at=bindparam("b_now"),
        last_commit=bindparam("b_token"),
        fork_at=bindparam("b_fork_at"),
        parent_id=bindparam("b_parent"),
        error_code=bindparam("b_error_code"),
        error_message=bindparam("b_error_message"),
        prompt_tokens=bindparam("b_prompt_tokens"),
        completion_tokens=bindparam("b_completion_tokens"),
        duration_s=bindparam("b_duration_s"),
    )
)


def _metrics_after(
    state: SessionState, log: EventLog, new: list[Event], *, replace: bool
) -> SessionMetrics:
    """The totals once ``new`` events are persisted: extended, or recounted whole (a
    rewritten history, or a session this store has not counted)."""
    if replace or state.metrics is None:
        return SessionMetrics.of(log.since(0))
    metrics = dataclasses.replace(state.metrics)
    metrics.add(new)
    return metrics


async def apply_commits(conn: AsyncConnection, ops: Sequence[CommitOp], now: float) -> None:
    """Apply ``ops`` (at most one per session) with one batched statement per table."""
    await check_fences(conn, ((op.session_id, op.state.run_id, op.epoch) for op in ops))
    replaced = [op for op in ops if op.snap.replace]
    if replaced:
        await _check_dependent_forks(conn, replaced)
        ids = [op.session_id for op in replaced]
        await conn.execute(events.delete().where(events.c.session_id.in_(ids)))
    rows = [row for op in ops for row in op.rows]
    if rows:
        await conn.execute(events.insert(), rows)
    before = await facts_of(conn, [op.session_id for op in ops])
    await conn.execute(_SESSION_UPDATE, [op.session_params(now) for op in ops])
    rollup = Rollup()
    for op in ops:
        old = before.get(op.session_id)
        if old is not None:
            rollup.move(old, old.with_values(status=op.status, reward=op.reward, **op.derived()))
    await apply_rollup(conn, rollup)
    deltas: dict[str, RunDelta] = {}
    for op in ops:
        if op.counters_change():
            deltas.setdefault(op.state.run_id, RunDelta()).add(op.run_delta())
    await apply_run_deltas(conn, deltas)


async def _check_dependent_forks(conn: AsyncConnection, ops: Sequence[CommitOp]) -> None:
    """Refuse to rewrite events that a fork of the session still reads."""
    by_id = {op.session_id: op for op in ops}
    query = (
        select(sessions.c.parent_id, func.max(sessions.c.fork_at))
        .where(sessions.c.parent_id.in_(list(by_id)))
        .group_by(sessions.c.parent_id)
    )
    for parent_id, max_fork_at in (await conn.execute(query)).all():
        op = by_id[parent_id]
        if max_fork_at is not None and max_fork_at > op.snap.changed_from:
            raise ForkDependencyError(
                f"session {parent_id}: a fork reads its first {max_fork_at} events; "
                f"cannot rewrite history from event {op.snap.changed_from}"
            )
