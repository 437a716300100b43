"""Persist every rollout's events through a store, incrementally, as calls finish.

This is what ``rolltap gateway --store URL`` runs: each rollout is a session of one run;
after every call its log is committed (only the new events are written), and when the
rollout ends the final commit carries its status. Commits are issued concurrently so the
store's serial writer can group them into one transaction.

>>> async def main(store: Store, endpoint: EndpointConfig) -> None:  # doctest: +SKIP
...     run = await store.create_run("standalone")
...     async with StoreRecorder(store, run.id) as recorder:
...         async with Gateway(endpoint, observers=[recorder]) as gateway:
...             ...
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from typing import Any

from rolltap.errors import StoreError
from rolltap.gateway.rollout import Rollout
from rolltap.store import Store

__all__ = ["StoreRecorder"]

log = logging.getLogger("rolltap.gateway.recorder")


class StoreRecorder:
    """A :class:`~rolltap.gateway.observer.RolloutObserver` that commits to a store."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.failures = 0
        self._created: dict[str, asyncio.Task[Any]] = {}
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

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        if self._tasks is None:
            coro.close()
            raise StoreError("the recorder is closed")
        return self._tasks.create_task(coro)

    def rollout_registered(self, rollout: Rollout) -> None:
        task = {"metadata": rollout.metadata, "endpoint": rollout.endpoint.name}
        self._created[rollout.id] = self._spawn(
            self.store.create_session(
                self.run_id, session_id=rollout.id, user=rollout.user, task=task
            )
        )

    def call_finished(self, rollout: Rollout) -> None:
        self._spawn(self._commit(rollout, "running"))

    def rollout_ended(self, rollout: Rollout, status: str) -> None:
        self._spawn(self._commit(rollout, status, final=True))

    async def _commit(self, rollout: Rollout, status: str, *, final: bool = False) -> None:
        created = self._created.get(rollout.id)
        try:
            if created is not None:
                await created
            await self.store.commit(rollout.id, rollout.log, status=status)
        except StoreError as err:
            # Nothing is lost: the persisted prefix did not advance, so the next commit
            # of this rollout writes these events too. A failed final commit is logged.
            self.failures += 1
            log.warning("commit of rollout %s failed: %s", rollout.id, err)
        finally:
            if final:
                self._created.pop(rollout.id, None)
                # the store need not remember a finished session's prefix any longer
                self.store.forget(rollout.id)
