"""Where a worker's rollouts are written: its own store, or shipped to the supervisor.

With PostgreSQL or MySQL every worker opens the store itself, so W workers commit
through W writers. SQLite allows one writer only, so there the supervisor owns the
store and each worker passes a :class:`ShippedStore` to its runner: every write
travels as a ``store`` frame, and a commit carries only the events the supervisor has
not been sent yet. Both are a :class:`~rolltap.rollouts.recorder.SessionStore`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

from rolltap.errors import StoreBusyError, StoreError
from rolltap.events import EventLog
from rolltap.rollouts.recorder import SessionStore
from rolltap.serve.protocol import Channel, ChannelClosedError, Msg
from rolltap.store import (
    CommitResult,
    SessionInfo,
    StoreConflictError,
    StoreFencedError,
    StoreFullError,
    StoreNotFoundError,
    StoreUnavailableError,
)

__all__ = ["JobStore", "ShippedStore", "StoreRpc", "error_from_reply"]

_ERRORS: dict[str, type[StoreError]] = {
    cls.code: cls
    for cls in (
        StoreBusyError, StoreConflictError, StoreFencedError, StoreFullError,
        StoreNotFoundError, StoreUnavailableError,
    )
}  # fmt: skip


def error_from_reply(error: Mapping[str, Any]) -> StoreError:
    """The store error the supervisor reported, as the class a local store would raise."""
    cls = _ERRORS.get(str(error.get("code")), StoreError)
    message = str(error.get("message", "store error"))
    if cls is StoreBusyError:
        return StoreBusyError(message, retry_after=1.0)
    return cls(f"supervisor store: {message}")


class StoreRpc:
    """Requests to the supervisor's store and their replies, matched by id."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}

    async def call(self, op: str, **args: Any) -> Any:
        """Send ``op`` and wait for its reply; its error is raised as a StoreError."""
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._channel.send({"type": Msg.STORE, "id": request_id, "op": op, **args})
            return await future
        except ChannelClosedError as exc:
            raise StoreError("the supervisor went away") from exc
        finally:
            self._pending.pop(request_id, None)

    def notify(self, op: str, **args: Any) -> None:
        """Send ``op`` without waiting for a reply (nor for the socket to drain)."""
        self._channel.send_nowait({"type": Msg.STORE, "id": 0, "op": op, **args})

    def resolve(self, reply: Mapping[str, Any]) -> None:
        """Called by the receive loop with each ``store_reply``."""
        future = self._pending.get(int(reply["id"]))
        if future is None or future.done():
            return
        if reply.get("ok"):
            future.set_result(reply.get("value"))
        else:
            future.set_exception(error_from_reply(reply.get("error") or {}))

    def fail_all(self, error: StoreError) -> None:
        """The supervisor is gone: every pending request fails with ``error``."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)


class ShippedStore:
    """A session store whose writes the supervisor makes (the SQLite case)."""

    def __init__(self, rpc: StoreRpc) -> None:
        self._rpc = rpc
        #: per session: how many of its log's events the supervisor has
        self._shipped: dict[str, int] = {}

    async def create_session(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        user: str | None = None,
        task: Mapping[str, Any] | None = None,
        node_id: str | None = None,
        worker_id: str | None = None,
        attempt: int = 0,
        retry_of: str | None = None,
    ) -> SessionInfo:
        value = await self._rpc.call(
            "create_session", run_id=run_id, session_id=session_id, user=user, task=task,
            node_id=node_id, worker_id=worker_id, attempt=attempt, retry_of=retry_of,
        )  # fmt: skip
        info = SessionInfo(**value)
        self._shipped[info.id] = 0
        return info

    async def commit(
        self,
        session_id: str,
        log: EventLog,
        *,
        status: str | None = None,
        reward: float | None = None,
    ) -> CommitResult:
        shipped = self._shipped.get(session_id, 0)
        # one synchronous step, like the store's own commit: events appended while the
        # frame is in flight go with the next commit
        snap = log.snapshot(shipped)
        start = snap.changed_from if snap.replace else shipped
        events = [event.to_dict() for event in log.since(start)[: snap.length - start]]
        value = await self._rpc.call(
            "commit", session_id=session_id, start=start, events=events,
            status=status, reward=reward,
        )  # fmt: skip
        self._shipped[session_id] = snap.length
        log.mark_persisted(snap.epoch)
        return CommitResult(**value)

    def forget(self, session_id: str) -> None:
        self._shipped.pop(session_id, None)
        try:
            self._rpc.notify("forget", session_id=session_id)
        except ChannelClosedError:
            return  # the supervisor is gone, and with it whatever it remembered


class JobStore:
    """One job's view of the worker's store: its session gets the supervisor's id.

    The supervisor names every rollout's session before dispatching it, so it can
    store ``worker_lost`` for it even when the worker died before reporting anything.
    """

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store, self.session_id = store, session_id

    async def create_session(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        user: str | None = None,
        task: Mapping[str, Any] | None = None,
        node_id: str | None = None,
        worker_id: str | None = None,
        attempt: int = 0,
        retry_of: str | None = None,
    ) -> SessionInfo:
        return await self._store.create_session(
            run_id, session_id=session_id or self.session_id, user=user, task=task,
            node_id=node_id, worker_id=worker_id, attempt=attempt, retry_of=retry_of,
        )  # fmt: skip

    async def commit(
        self,
        session_id: str,
        log: EventLog,
        *,
        status: str | None = None,
        reward: float | None = None,
    ) -> CommitResult:
        return await self._store.commit(session_id, log, status=status, reward=reward)

    def forget(self, session_id: str) -> None:
        self._store.forget(session_id)
