"""Persist every rollout's events through a store, incrementally, as calls finish.

After each call of a rollout its log is committed (only the new events are written),
with at most one commit in flight per session: calls that finish meanwhile are folded
into the next one. Commits of different rollouts run concurrently so the store's serial
writer can group them into one transaction.

Every commit goes to the rollout's ``session_id``, set once when it registered (its
``metadata["session_id"]``, else its id). Two owners use it. ``rolltap gateway --store
URL`` gives a ``run_id``: each rollout's session is created in that run before its
registration completes (an id the store holds already fails it: ``409 session_exists``),
and its final commit carries the status it ended with. The eval runner creates its
sessions itself and registers each rollout with its session's id, passes
``final_commit=False``, and after :meth:`settle` makes the final commit with status and
reward, so no incremental commit lands after it.

>>> async def main(store: Store, endpoint: EndpointConfig) -> None:  # doctest: +SKIP
...     run = await store.create_run("standalone")
...     async with StoreRecorder(store, run.id) as recorder:
...         async with Gateway(endpoint, observers=[recorder]) as gateway:
...             ...
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from contextlib import AsyncExitStack
from typing import Any, Protocol

from rolltap.errors import SessionExistsError, StoreError
from rolltap.events import Event, EventLog
from rolltap.gateway.rollout import SESSION_KEY, Rollout
from rolltap.store import CommitResult, SessionInfo, StoreConflictError

__all__ = ["SESSION_KEY", "SessionStore", "StoreRecorder"]

log = logging.getLogger("rolltap.rollouts.recorder")


class SessionStore(Protocol):
    """The part of :class:`~rolltap.store.Store` that a rollout's owner writes through.

    A :class:`~rolltap.store.Store` is one; a ``rolltap serve`` worker on SQLite passes
    one that ships each write to the supervisor, which owns the only writer.
    ``node_id`` and ``worker_id`` record where the session runs (None: not said);
    ``attempt`` and ``retry_of`` make it a later attempt of the session it repeats.
    """

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
    ) -> SessionInfo: ...

    async def commit(
        self,
        session_id: str,
        log: EventLog,
        *,
        status: str | None = None,
        reward: float | None = None,
    ) -> CommitResult: ...

    def forget(self, session_id: str) -> None: ...


class HistoryReader(Protocol):
    """Reads a session's stored history back (a :class:`~rolltap.store.Store` does)."""

    async def events(self, session_id: str) -> list[Event]: ...


#: a rollout whose request bodies reach this size (bytes) has the messages of its
#: durable request events released from memory (:meth:`StoreRecorder.history` reads them
#: back): a long agent's history is then held once, in the store, not for the rollout's life
RELEASE_OVER_BYTES = 64 * 1024


class StoreRecorder:
    """A :class:`~rolltap.gateway.observer.RolloutObserver` that commits to a store.

    Given a ``reader`` (the store itself), it is also a
    :class:`~rolltap.gateway.observer.HistoryKeeper`: once a rollout's request bodies
    reach ``release_over`` bytes, each commit releases the messages of the request events
    it made durable (:meth:`~rolltap.events.EventLog.release`), and :meth:`history` reads
    them back for whoever needs the whole history (rewards, the admin API's events).
    """

    def __init__(
        self, store: SessionStore, run_id: str | None = None, *, final_commit: bool = True,
        reader: HistoryReader | None = None, release_over: int = RELEASE_OVER_BYTES,
    ) -> None:  # fmt: skip
        self.store = store
        self.run_id = run_id
        self.final_commit = final_commit
        self.failures = 0
        self.reader, self.release_over = reader, release_over
        #: sessions whose durable request events are released after each commit
        self._releasing: set[str] = set()
        self._dirty: dict[str, EventLog] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._stack = AsyncExitStack()
        self._tasks: asyncio.TaskGroup | None = None

    async def __aenter__(self) -> StoreRecorder:
        self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for every pending commit (the final ones included). Idempotent."""
        self._tasks = None
        await self._stack.aclose()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        if self._tasks is None:
            coro.close()
            raise StoreError("the recorder is closed")
        return self._tasks.create_task(coro)

    async def admit_rollout(self, rollout: Rollout) -> None:
        """Create the rollout's session in the run (when this recorder has one)."""
        if self.run_id is None:
            return  # the owner created the session itself
        task = {"metadata": rollout.metadata, "endpoint": rollout.endpoint.name}
        try:
            await self.store.create_session(
                self.run_id, session_id=rollout.session_id, user=rollout.user, task=task
            )
        except StoreConflictError as exc:
            raise SessionExistsError(f"the store holds session {rollout.session_id!r}") from exc

    def rollout_registered(self, rollout: Rollout) -> None:
        pass

    def call_finished(self, rollout: Rollout) -> None:
        session_id = rollout.session_id
        self._dirty[session_id] = rollout.log
        if self.reader is not None and rollout.history_bytes >= self.release_over:
            self._releasing.add(session_id)
        if session_id not in self._pending:
            self._pending[session_id] = self._spawn(self._drain(session_id))

    def rollout_ended(self, rollout: Rollout, status: str) -> None:
        if self.final_commit:
            self._spawn(self._finish(rollout, status))

    async def history(self, rollout: Rollout) -> list[Event]:
        """``rollout``'s whole history: its log, the events released from it read back
        from the store."""
        log = rollout.log
        while log.released and self.reader is not None:
            stored = await self.reader.events(rollout.session_id)
            # a commit that landed during the read may have released more: read again
            if len(stored) >= log.released:
                return log.whole(stored)
        return list(log)

    async def settle(self, session_id: str) -> None:
        """Wait until no incremental commit of ``session_id`` is pending."""
        self._dirty.pop(session_id, None)
        self._releasing.discard(session_id)
        task = self._pending.get(session_id)
        if task is not None:
            await asyncio.wait([task])

    async def _drain(self, session_id: str) -> None:
        try:
            while (events := self._dirty.pop(session_id, None)) is not None:
                done = await self.store.commit(session_id, events, status="running")
                if session_id in self._releasing:
                    events.release(done.n_events)
        except StoreError as err:
            # Nothing is lost: the persisted prefix did not advance, so the next commit
            # of this session (the final one at the latest) writes these events too.
            self.failures += 1
            quiet = err.code in ("store_unavailable", "store_full")  # the owner reports it once
            log.log(logging.DEBUG if quiet else logging.WARNING,
                    "commit of session %s failed: %s", session_id, err)  # fmt: skip
        finally:
            self._pending.pop(session_id, None)

    async def _finish(self, rollout: Rollout, status: str) -> None:
        session_id = rollout.session_id
        await self.settle(session_id)  # nothing is released from here on
        try:
            await self.store.commit(session_id, rollout.log, status=status)
        except StoreError as err:
            self.failures += 1
            log.warning("final commit of session %s failed: %s", session_id, err)
        finally:
            # the store need not remember a finished session's prefix any longer
            self.store.forget(session_id)
