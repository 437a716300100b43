"""How a worker slot is started: the launcher. The worker and its protocol are the same
whichever launcher starts it; only the process and the channel's transport differ.

* :class:`ProcessLauncher` — a child process on this machine over a socket pair
  (``rolltap serve``'s workers, ``rolltap eval --workers N``);
* :class:`~rolltap.serve.launch.ray_actor.RayLauncher` — a Ray actor on any node of a cluster,
  its channel a TCP connection back to the driver (``--ray``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from typing import Protocol

from rolltap.serve.config import TOKEN_ENV
from rolltap.serve.protocol import Channel

__all__ = ["Launcher", "ProcessLauncher", "WorkerProcess", "worker_env"]


def worker_env() -> dict[str, str]:
    """The environment of a worker: ours, with our import path, without the token (so
    any harness the supervisor can import, its workers can; none sees the token)."""
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class WorkerProcess(Protocol):
    """What the supervisor holds of a running worker, whatever started it."""

    @property
    def pid(self) -> int | None: ...

    @property
    def alive(self) -> bool: ...

    def kill(self) -> None:
        """Kill the worker at once (no-op once it has exited)."""

    async def wait(self) -> int | None:
        """Wait for it to end; its exit status (None: never started, or not known)."""

    def describe_exit(self, code: int | None) -> str:
        """How it ended, for a person (``killed by SIGKILL``, ``exit status 1``, …)."""


class Launcher(Protocol):
    """Starts worker slots. ``start`` returns once the worker's channel is connected."""

    kind: str

    async def start(self, index: int, generation: int) -> tuple[WorkerProcess, Channel]: ...


class _ChildProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.returncode is None

    def kill(self) -> None:
        if self.alive:
            try:
                self._proc.kill()
            except ProcessLookupError:
                return  # it exited between the check and the kill

    async def wait(self) -> int | None:
        return await self._proc.wait()

    def describe_exit(self, code: int | None) -> str:
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"


class ProcessLauncher:
    """``python -m rolltap.serve.worker.process FD``, ``FD`` its end of a socket pair (an asyncio
    subprocess, so its exit is awaited, never polled)."""

    kind = "processes"

    async def start(self, index: int, generation: int) -> tuple[WorkerProcess, Channel]:
        parent, child = socket.socketpair()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "rolltap.serve.worker.process", str(child.fileno()),
                pass_fds=(child.fileno(),), env=worker_env(),
                stdin=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()  # the worker holds its own copy; ours would hide its death
        return _ChildProcess(proc), await Channel.over(parent)
