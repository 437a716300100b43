"""Commit each rollout's event log to the store incrementally, as its calls finish.

A gateway observer: after every model call of a rollout it schedules a commit of that
rollout's log (only new events are written), at most one in flight per rollout; the
runner calls :meth:`CommitObserver.settle` before the final commit (status + reward),
so an incremental commit can never land after it.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack

from rolltap.errors import StoreError
from rolltap.gateway import Rollout
from rolltap.store import EventLog, Store

__all__ = ["SESSION_KEY", "CommitObserver"]

log = logging.getLogger("rolltap.rollouts.persist")

#: the rollout metadata key naming its store session
SESSION_KEY = "session_id"


class CommitObserver:
    """A :class:`~rolltap.gateway.observer.RolloutObserver` that owns its commit tasks."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.failures = 0
        self._dirty: dict[str, EventLog] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._stack = AsyncExitStack()
        self._tasks: asyncio.TaskGroup | None = None

    async def __aenter__(self) -> CommitObserver:
        self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._tasks = None
        await self._stack.aclose()

    def rollout_registered(self, rollout: Rollout) -> None:
        """Nothing to do: the runner created the session before registering."""

    def call_finished(self, rollout: Rollout) -> None:
        session_id = rollout.metadata.get(SESSION_KEY)
        if not isinstance(session_id, str) or self._tasks is None:
            return
        self._dirty[session_id] = rollout.log
        if session_id not in self._pending:
            self._pending[session_id] = self._tasks.create_task(self._drain(session_id))

    def rollout_ended(self, rollout: Rollout, status: str) -> None:
        """Nothing to do: the runner makes the final commit."""

    async def settle(self, session_id: str) -> None:
        """Wait until no incremental commit of ``session_id`` is pending."""
        self._dirty.pop(session_id, None)
        task = self._pending.get(session_id)
        if task is not None:
            await asyncio.wait([task])

    async def _drain(self, session_id: str) -> None:
        try:
            while (events := self._dirty.pop(session_id, None)) is not None:
                await self.store.commit(session_id, events, status="running")
        except StoreError as err:
            # Nothing is lost: the persisted prefix did not advance, so the final commit
            # writes these events too.
            self.failures += 1
            log.warning("incremental commit of session %s failed: %s", session_id, err)
        finally:
            self._pending.pop(session_id, None)
