"""The supervisor's bookkeeping: submitted batches, their rollouts (jobs), and results.

A :class:`Batch` is what one caller submitted and waits on. Each of its jobs resolves
exactly once — with the worker's result, or ``worker_lost``/``cancelled`` decided by
the supervisor — and every resolution is delivered to the batch's stream, so a caller
reading it always reaches the end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rolltap.rollouts.tasks import Task
from rolltap.serve.protocol import RolloutSpec

if TYPE_CHECKING:
    from rolltap.serve.handle import WorkerHandle

__all__ = ["Batch", "Job", "RecentResults", "new_id"]


def new_id() -> str:
    """A rollout or batch id (a rollout's id is also its store session id)."""
    return uuid.uuid4().hex


@dataclass(eq=False)
class Job:
    """One rollout of a batch, placed on a worker."""

    id: str
    batch: Batch
    spec: RolloutSpec
    task: Task
    worker: WorkerHandle
    #: loop time after which a live worker that has not answered is deemed broken
    deadline: float
    cancel_requested: bool = False
    done: bool = False

    def submit_frame(self) -> dict[str, Any]:
        return {
            "type": "submit",
            "job": self.id,
            "run_id": self.batch.run_id,
            "session_id": self.id,
            "epoch": self.batch.epoch,
            "spec": self.spec.model_dump(mode="json"),
        }


@dataclass(eq=False)
class Batch:
    """A submission: its jobs, and the stream of their results in finish order."""

    id: str
    run_id: str
    #: the supervisor's lease epoch for the run: the workers' writes carry it
    epoch: int | None = None
    jobs: dict[str, Job] = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    delivered: int = 0
    _results: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)

    @property
    def finished(self) -> bool:
        return self.delivered == len(self.jobs)

    def deliver(self, result: dict[str, Any]) -> None:
        # at most one result per job, so the queue never holds more than the batch size
        self.delivered += 1
        self._results.put_nowait(result)

    async def results(
        self, keepalive_s: float | None = None
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Each result as it lands; ``None`` every ``keepalive_s`` of silence."""
        received = 0
        while received < len(self.jobs):
            try:
                async with asyncio.timeout(keepalive_s):
                    result = await self._results.get()
            except TimeoutError:
                yield None
                continue
            received += 1
            yield result

    def counts(self) -> dict[str, int]:
        running = sum(1 for job in self.jobs.values() if not job.done)
        return {
            "rollouts": len(self.jobs),
            "finished": len(self.jobs) - running,
            "running": running,
        }


class RecentResults:
    """The last ``limit`` results by rollout id, for status queries (bounded memory)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._items: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def add(self, result: dict[str, Any]) -> None:
        self._items[result["id"]] = result
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def get(self, rollout_id: str) -> dict[str, Any] | None:
        return self._items.get(rollout_id)
