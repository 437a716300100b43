r"""The supervisor's records: each worker's handle, the rollouts placed on it (jobs), and
the batches they came in.

A :class:`WorkerHandle` is the supervisor's side of one worker: spawn it (through a
launcher), talk to it, watch it, kill it; how it is started — a child process, a Ray
actor — is the launcher's business (:mod:`rolltap.serve.launch.child_process`), the handle sees a
:class:`~rolltap.serve.launch.child_process.WorkerProcess` and a channel.

A :class:`Batch` is what one caller submitted and waits on; each of its :class:`Job`\ s
(one rollout, placed on a worker) resolves exactly once — with the worker's result, or
``worker_lost``/``cancelled`` decided by the supervisor — and every resolution is
delivered to the batch's stream, so a caller reading it always reaches the end. The
three refer to one another, so they live in one module.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from rolltap.rollouts.tasks import Task
from rolltap.serve.launch.child_process import Launcher, WorkerProcess
from rolltap.serve.protocol import Channel, Msg, RolloutSpec, WorkerConfig

__all__ = ["Batch", "Job", "RecentResults", "WorkerHandle", "new_id"]


class WorkerHandle:
    """One worker process: its channel, state, jobs, latest stats.

    ``state`` moves ``starting`` → ``ready`` → ``stopping`` (a clean shutdown) or
    ``lost`` (dead, or killed for a missed heartbeat).
    """

    def __init__(self, index: int, generation: int) -> None:
        self.index, self.generation = index, generation
        self.state = "starting"
        self.proc: WorkerProcess | None = None
        #: the node it runs on and its process id there, from its ``ready`` frame
        self.node: str | None = None
        self.remote_pid: int | None = None
        self.channel: Channel | None = None
        self.jobs: dict[str, Job] = {}
        self.stats: dict[str, Any] = {}
        #: its own store writer's health (server backends), from ``store_state`` frames
        self.store_state: dict[str, Any] = {}
        self.ready = asyncio.Event()
        self.last_seen = asyncio.get_running_loop().time()
        #: shipped store writes received from this worker and not yet answered
        self.store_tasks: set[asyncio.Task[None]] = set()
        self.lost_reason: str | None = None
        #: rollouts this worker finished (with its own result)
        self.finished = 0
        #: its gateway's policy gates by endpoint, as last reported (heartbeat or reply)
        self.policy: dict[str, Any] = {}

    @property
    def pid(self) -> int | None:
        if self.remote_pid is not None:
            return self.remote_pid
        return self.proc.pid if self.proc is not None else None

    @property
    def load(self) -> int:
        return len(self.jobs)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive

    def seen(self) -> None:
        self.last_seen = asyncio.get_running_loop().time()

    async def spawn(self, config: WorkerConfig, launcher: Launcher) -> None:
        """Start the worker and send its config (readiness comes as a ``ready`` frame)."""
        self.proc, self.channel = await launcher.start(self.index, self.generation)
        self.seen()
        await self.channel.send({"type": Msg.CONFIG, "config": config.model_dump(mode="json")})

    def kill(self) -> None:
        """Kill the worker at once (no-op once it has exited)."""
        if self.proc is not None:
            self.proc.kill()

    async def wait(self) -> int | None:
        """Wait for the process to exit; its return code (None if it never started)."""
        if self.proc is None:
            return None
        return await self.proc.wait()

    async def send(self, message: dict[str, Any]) -> None:
        if self.channel is not None:
            await self.channel.send(message)

    async def aclose(self) -> None:
        if self.channel is not None:
            await self.channel.aclose()

    def describe(self) -> dict[str, Any]:
        """For ``/status``: who it is, what it runs, and its latest stats."""
        stats = {k: v for k, v in self.stats.items() if k != "type"}
        return {
            "index": self.index,
            "generation": self.generation,
            "pid": self.pid,
            "node": self.node,
            "state": self.state,
            "load": self.load,
            "finished": self.finished,
            "store": self.store_state,
            "stats": stats,
        }


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
    #: a later attempt of its (task, sample) repeats the session ``retry_of`` (an eval's
    #: ``--retry-failed``; not part of the service's API)
    attempt: int = 0
    retry_of: str | None = None

    def submit_frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "type": "submit",
            "job": self.id,
            "run_id": self.batch.run_id,
            "session_id": self.id,
            "epoch": self.batch.epoch,
            "spec": self.spec.model_dump(mode="json"),
        }
        if self.attempt:
            frame["attempt"], frame["retry_of"] = self.attempt, self.retry_of
        return frame


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
