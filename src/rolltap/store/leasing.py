"""Holding a run's lease: :class:`StoreLeases` (the Store's lease calls) and
:class:`LeaseKeeper`, which takes a lease, renews it in the background and releases it.

>>> async def own(store: Store, run_id: str) -> None:
...     async with LeaseKeeper(store, run_id, ttl_s=120.0) as lease:
...         ...  # every commit of the run's sessions now carries lease.epoch
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from types import TracebackType
from typing import Any, Protocol

from rolltap.errors import StoreError
from rolltap.store.errors import StoreFencedError
from rolltap.store.lease import AcquireLeaseOp, LeaseInfo, ReleaseLeaseOp, RenewLeaseOp
from rolltap.store.ops import WriteOp

__all__ = ["DEFAULT_LEASE_TTL_S", "RENEW_INTERVAL_S", "LeaseKeeper", "StoreLeases", "owner_name"]

log = logging.getLogger(__name__)

#: how long a lease lasts unrenewed: longer than a database outage a run must survive
DEFAULT_LEASE_TTL_S = 120.0
#: how often an owner renews (at most a third of the ttl)
RENEW_INTERVAL_S = 10.0


def owner_name(role: str) -> str:
    """``role@host:pid``: who holds a lease, for people reading the table."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}"[:255]


class StoreLeases:
    """The lease calls of :class:`~rolltap.store.Store` (mixed in)."""

    #: the epoch this store's commits carry, per run it owns
    _epochs: dict[str, int]

    async def _write(self, op: WriteOp) -> Any:
        raise NotImplementedError

    async def acquire_lease(self, run_id: str, *, owner: str, ttl_s: float) -> LeaseInfo:
        """Take over ``run_id``: epoch + 1; unfinished sessions left by an earlier owner are
        stored ``interrupted``. From now on this store's commits of the run carry the epoch.

        >>> # lease = await store.acquire_lease(run.id, owner="eval", ttl_s=120)
        """
        op = AcquireLeaseOp(run_id, owner, ttl_s, on_success=self._hold)
        result: LeaseInfo = await self._write(op)
        return result

    def _hold(self, lease: LeaseInfo) -> None:
        self.hold_epoch(lease.run_id, lease.epoch)

    def hold_epoch(self, run_id: str, epoch: int) -> None:
        """Fence this store's writes of ``run_id`` with ``epoch``: a lease another process of
        the same owner holds (a serve worker writes for its supervisor). Once a newer owner
        takes the run over, its session creates and commits are refused (``store_fenced``).
        """
        self._epochs[run_id] = epoch

    async def renew_lease(self, lease: LeaseInfo) -> float:
        """Push the lease's expiry ``ttl_s`` ahead; the new expiry. StoreFencedError if lost."""
        expires_at: float = await self._write(RenewLeaseOp(lease))
        return expires_at

    async def release_lease(self, lease: LeaseInfo) -> None:
        """End the lease now (the owner stops cleanly)."""
        await self._write(ReleaseLeaseOp(lease))


class LeaseHolder(Protocol):
    """What a :class:`LeaseKeeper` needs of a store: its lease calls (:class:`StoreLeases`)."""

    async def acquire_lease(self, run_id: str, *, owner: str, ttl_s: float) -> LeaseInfo: ...
    async def renew_lease(self, lease: LeaseInfo) -> float: ...
    async def release_lease(self, lease: LeaseInfo) -> None: ...


class LeaseKeeper:
    """Take a run's lease on enter, renew it every ``interval_s``, release it on exit.

    A renewal the store cannot make (an outage) is retried at the next tick: the ttl is
    meant to outlast it. A lost lease (another owner took over) stops the renewals;
    the store then refuses this owner's commits (``store_fenced``).
    """

    def __init__(
        self, store: LeaseHolder, run_id: str, *, ttl_s: float = DEFAULT_LEASE_TTL_S,
        role: str = "owner", interval_s: float | None = None,
    ) -> None:  # fmt: skip
        self._store, self._run_id, self._ttl_s, self._role = store, run_id, ttl_s, role
        self._interval = min(RENEW_INTERVAL_S, ttl_s / 3) if interval_s is None else interval_s
        self._task: asyncio.Task[None] | None = None
        self.lease: LeaseInfo | None = None
        self.lost = False
        self.renewals = 0

    async def __aenter__(self) -> LeaseInfo:
        owner = owner_name(self._role)
        self.lease = await self._store.acquire_lease(self._run_id, owner=owner, ttl_s=self._ttl_s)
        if self.lease.interrupted:
            log.warning(
                "run %s: took over from a lost owner; %d session(s) interrupted",
                self._run_id, self.lease.interrupted,
            )  # fmt: skip
        self._task = asyncio.get_running_loop().create_task(self._renew(self.lease))
        return self.lease

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        if self.lease is not None and not self.lost:
            try:
                await self._store.release_lease(self.lease)
            except StoreError as exc:  # it expires on its own
                log.warning("run %s: lease not released: %s", self._run_id, exc)

    async def _renew(self, lease: LeaseInfo) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self._store.renew_lease(lease)
                self.renewals += 1
            except StoreFencedError as exc:
                self.lost = True
                log.error("run %s: lease lost: %s", self._run_id, exc)
                return
            except StoreError as exc:
                log.warning("run %s: lease not renewed (retrying): %s", self._run_id, exc)
