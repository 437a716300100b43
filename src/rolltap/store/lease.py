"""Run leases: one owner per run, renewed in time, fenced by an epoch.

A run owner (``rolltap eval``'s run, a ``rolltap serve`` supervisor, ``rolltap gateway
--store``) takes the run's lease with :class:`AcquireLeaseOp`: the lease's epoch grows by
one, and the ``pending``/``running`` sessions a previous owner left are stored as
``interrupted``. Every commit of a session of that run carries the owner's epoch;
:func:`rolltap.store.fence.check_fences` refuses one whose epoch is older than the
lease's. Readers show a ``pending``/``running`` session of a run whose lease expired as
``interrupted`` (:func:`effective_status`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.results.statuses import INTERRUPTED, UNFINISHED_STATUSES
from rolltap.store.errors import StoreFencedError, StoreNotFoundError
from rolltap.store.ops import RunDelta, WriteOp, apply_run_deltas
from rolltap.store.rollup import Rollup
from rolltap.store.rollup_sql import apply_rollup
from rolltap.store.schema import leases, runs, sessions

__all__ = [
    "AcquireLeaseOp",
    "LeaseInfo",
    "ReleaseLeaseOp",
    "RenewLeaseOp",
    "effective_status",
    "run_status_filter",
    "status_filter",
]

_UNFINISHED = sorted(UNFINISHED_STATUSES)


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A run's lease as its owner took it: ``interrupted`` sessions it found and stored so."""

    run_id: str
    owner: str
    epoch: int
    ttl_s: float
    expires_at: float
    interrupted: int = 0


def effective_status(status: str, lease_expires_at: float | None, now: float) -> str:
    """What a reader shows: an unfinished session of a run whose lease expired is interrupted.

    >>> effective_status("running", 10.0, now=11.0), effective_status("running", None, 11.0)
    ('interrupted', 'running')
    """
    expired = lease_expires_at is not None and lease_expires_at < now
    return INTERRUPTED if expired and status in UNFINISHED_STATUSES else status


def status_filter(status: str, now: float) -> ColumnElement[bool]:
    """A WHERE clause (over sessions outer-joined with leases) for a status as readers see it."""
    expired = and_(leases.c.expires_at.is_not(None), leases.c.expires_at < now)
    if status == INTERRUPTED:
        return or_(
            sessions.c.status == INTERRUPTED,
            and_(sessions.c.status.in_(_UNFINISHED), expired),
        )
    if status in UNFINISHED_STATUSES:
        return and_(sessions.c.status == status, ~expired)
    return sessions.c.status == status


def run_status_filter(status: str, expired: bool) -> ColumnElement[bool]:
    """:func:`status_filter` for the sessions of one run whose lease is known to be
    ``expired`` or not: no join, so a page of them reads from the run's indexes."""
    if status == INTERRUPTED and expired:
        return sessions.c.status.in_([INTERRUPTED, *_UNFINISHED])
    if status in UNFINISHED_STATUSES and expired:
        return false()
    return sessions.c.status == status


class AcquireLeaseOp(WriteOp):
    """Take a run's lease (epoch + 1); store the previous owner's unfinished sessions as
    interrupted."""

    def __init__(
        self, run_id: str, owner: str, ttl_s: float,
        on_success: Callable[[LeaseInfo], None] | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.run_id, self.owner, self.ttl_s = run_id, owner, ttl_s
        self._callback = on_success
        self.lease: LeaseInfo | None = None

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        if await conn.scalar(select(runs.c.id).where(runs.c.id == self.run_id)) is None:
            raise StoreNotFoundError(f"no run {self.run_id!r}")
        values: dict[str, Any] = {
            "owner": self.owner, "ttl_s": self.ttl_s, "expires_at": now + self.ttl_s,
            "token": self.token,
        }  # fmt: skip
        taken = await conn.execute(
            leases.update()
            .where(leases.c.run_id == self.run_id)
            .values(epoch=leases.c.epoch + 1, **values)
        )
        interrupted = 0
        if taken.rowcount == 0:
            await conn.execute(leases.insert().values(run_id=self.run_id, epoch=1, **values))
        else:
            interrupted = await self._interrupt(conn, now)
        epoch = await conn.scalar(select(leases.c.epoch).where(leases.c.run_id == self.run_id))
        assert epoch is not None
        self.lease = LeaseInfo(
            self.run_id, self.owner, epoch, self.ttl_s, now + self.ttl_s, interrupted
        )

    async def _interrupt(self, conn: AsyncConnection, now: float) -> int:
        """Store the unfinished sessions of the run as interrupted (its previous owner is gone)."""
        mine = and_(sessions.c.run_id == self.run_id, sessions.c.status.in_(_UNFINISHED))
        query = select(sessions.c.status, func.count()).where(mine).group_by(sessions.c.status)
        by_status = {status: int(n) for status, n in await conn.execute(query)}
        count = sum(by_status.values())
        if not count:
            return 0
        await conn.execute(sessions.update().where(mine).values(status=INTERRUPTED, updated_at=now))
        await apply_run_deltas(conn, {self.run_id: RunDelta(finished=count, failed=count)})
        rollup = Rollup()
        for status, n in by_status.items():
            rollup.stats[(self.run_id, "status", status)][0] -= n
        rollup.stats[(self.run_id, "status", INTERRUPTED)][0] += count
        await apply_rollup(conn, rollup)
        return count

    async def applied(self, conn: AsyncConnection) -> bool:
        query = select(leases).where(leases.c.run_id == self.run_id)
        row = (await conn.execute(query)).mappings().first()
        if row is None or row["token"] != self.token:
            return False
        # a COMMIT whose answer was lost: the interrupted count is not known any more
        self.lease = LeaseInfo(
            self.run_id, row["owner"], row["epoch"], row["ttl_s"], row["expires_at"]
        )
        return True

    def outcome(self) -> LeaseInfo:
        assert self.lease is not None
        return self.lease

    def on_success(self) -> None:
        if self._callback is not None and self.lease is not None:
            self._callback(self.lease)


class RenewLeaseOp(WriteOp):
    """Push a held lease's expiry ``ttl_s`` ahead; StoreFencedError if another owner took it."""

    def __init__(self, lease: LeaseInfo) -> None:
        super().__init__()
        self.lease = lease
        self.expires_at = 0.0

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        lease = self.lease
        self.expires_at = now + lease.ttl_s
        result = await conn.execute(
            leases.update()
            .where(leases.c.run_id == lease.run_id, leases.c.epoch == lease.epoch)
            .values(expires_at=self.expires_at)
        )
        if result.rowcount == 0:
            raise StoreFencedError(
                f"run {lease.run_id}: lease epoch {lease.epoch} was taken over by a newer owner"
            )

    async def applied(self, conn: AsyncConnection) -> bool:
        return False  # renewing twice is harmless

    def outcome(self) -> float:
        return self.expires_at


class ReleaseLeaseOp(WriteOp):
    """End a held lease now (a clean shutdown); nothing if another owner took it meanwhile."""

    def __init__(self, lease: LeaseInfo) -> None:
        super().__init__()
        self.lease = lease

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        await conn.execute(
            leases.update()
            .where(leases.c.run_id == self.lease.run_id, leases.c.epoch == self.lease.epoch)
            .values(expires_at=now)
        )

    async def applied(self, conn: AsyncConnection) -> bool:
        return False  # releasing twice is harmless
