"""The supervisor's handle on one worker: spawn (through a launcher), talk, watch, kill.

How the worker is started — a child process, a Ray actor — is the launcher's business
(:mod:`rolltap.serve.launch`); the handle sees a :class:`WorkerProcess` and a channel.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from rolltap.serve.launch import Launcher, WorkerProcess
from rolltap.serve.protocol import Channel, Msg, WorkerConfig

if TYPE_CHECKING:
    from rolltap.serve.batches import Job

__all__ = ["WorkerHandle"]


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
