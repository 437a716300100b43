"""The supervisor's handle on one worker process: spawn, talk, watch, kill.

A worker is ``python -m rolltap.serve.worker FD`` with ``FD`` its end of a socket pair
(an asyncio subprocess, so its exit is awaited, never polled). It sees the
supervisor's ``sys.path`` through ``PYTHONPATH``, so any harness the supervisor can
import, its workers can; it never sees the service token.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import TYPE_CHECKING, Any

from rolltap.serve.config import TOKEN_ENV
from rolltap.serve.protocol import Channel, Msg, WorkerConfig

if TYPE_CHECKING:
    from rolltap.serve.batches import Job

__all__ = ["WorkerHandle", "worker_env"]


def worker_env() -> dict[str, str]:
    """The environment of a worker: ours, with our import path, without the token."""
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class WorkerHandle:
    """One worker process: its channel, state, jobs, latest stats.

    ``state`` moves ``starting`` → ``ready`` → ``stopping`` (a clean shutdown) or
    ``lost`` (dead, or killed for a missed heartbeat).
    """

    def __init__(self, index: int, generation: int) -> None:
        self.index, self.generation = index, generation
        self.state = "starting"
        self.proc: asyncio.subprocess.Process | None = None
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

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def load(self) -> int:
        return len(self.jobs)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def seen(self) -> None:
        self.last_seen = asyncio.get_running_loop().time()

    async def spawn(self, config: WorkerConfig) -> None:
        """Start the process and send its config (readiness comes as a ``ready`` frame)."""
        parent, child = socket.socketpair()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "rolltap.serve.worker", str(child.fileno()),
                pass_fds=(child.fileno(),), env=worker_env(),
                stdin=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()  # the worker holds its own copy; ours would hide its death
        self.channel = await Channel.over(parent)
        self.seen()
        await self.channel.send({"type": Msg.CONFIG, "config": config.model_dump(mode="json")})

    def kill(self) -> None:
        """SIGKILL the process (no-op once it has exited)."""
        if self.alive and self.proc is not None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                return  # it exited between the check and the kill

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
            "state": self.state,
            "load": self.load,
            "store": self.store_state,
            "stats": stats,
        }
