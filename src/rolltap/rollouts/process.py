"""Child processes of a rollout: run one in its own session, capture its output, and kill
it with everything it started.

Used by ``--cmd`` harnesses (:mod:`rolltap.rollouts.subprocess_harness`), the agent
harnesses (:mod:`rolltap.rollouts.agents`) and task checks
(:mod:`rolltap.rollouts.agent_check`). The child starts in a new session (its own
process group) registered with the watchdog (:mod:`rolltap.proc.guard`) before it runs
anything, so rolltap's death, ``kill -9`` included, kills the group too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from rolltap.events import EventKind, EventLog
from rolltap.proc import guard, prepare, release

__all__ = [
    "LINE_LIMIT",
    "OUTPUT_LIMIT",
    "Captured",
    "ProcessOutput",
    "record_output",
    "run_process",
]

#: how much of each output stream is kept
OUTPUT_LIMIT = 64 * 1024
#: the longest line handed to a line reader (an agent's JSON event); the rest is dropped
LINE_LIMIT = 16 * 1024 * 1024
_CHUNK = 16 * 1024
#: how long a killed process's exit and the end of its pipes are waited for
_REAP_S = 5.0


@dataclass(slots=True)
class Captured:
    """What a child wrote to one stream: its last ``OUTPUT_LIMIT`` bytes and its length."""

    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > OUTPUT_LIMIT:
            del self.data[: len(self.data) - OUTPUT_LIMIT]

    def text(self) -> str:
        return self.data.decode(errors="replace")


@dataclass(slots=True)
class ProcessOutput:
    """A child's output, filled as it arrives (so a killed child's is still there).
    ``on_line``, when set, gets each stdout line (without its newline) as it comes."""

    on_line: Callable[[bytes], None] | None = None
    stdout: Captured = field(default_factory=Captured)
    stderr: Captured = field(default_factory=Captured)


async def _tail(stream: asyncio.StreamReader | None, into: Captured) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_CHUNK):
        into.add(chunk)


async def _lines(
    stream: asyncio.StreamReader | None, into: Captured, on_line: Callable[[bytes], None]
) -> None:
    """Read ``stream`` to its end, handing each line to ``on_line`` (its first
    ``LINE_LIMIT`` bytes) and keeping the tail in ``into``."""
    if stream is None:
        return
    line, dropping = bytearray(), False
    while chunk := await stream.read(_CHUNK):
        into.add(chunk)
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            if not dropping:
                line += piece[: LINE_LIMIT - len(line)]
            on_line(bytes(line))
            line, dropping = bytearray(), False
        if not dropping:
            line += rest[: LINE_LIMIT - len(line)]
            dropping = len(line) >= LINE_LIMIT
    if line:
        on_line(bytes(line))


def _kill_group(pgid: int) -> None:
    """Kill whatever is left of a process group (its own session)."""
    # ProcessLookupError: the whole group is gone already, nothing to kill.
    if pgid != os.getpgrp():  # never our own (a descendant cannot be in it, but still)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _kill_tree(process: asyncio.subprocess.Process) -> None:
    """Kill the child's group and every descendant that left it (an agent may start its
    tools in sessions of their own: Claude Code does), each with its group.

    Descendants are found only while the child is not reaped: once it is, its pid may
    belong to someone else, and its orphans have left the tree."""
    found: list[psutil.Process] = []
    if process.returncode is None:
        with contextlib.suppress(psutil.Error):
            found = psutil.Process(process.pid).children(recursive=True)
    _kill_group(process.pid)
    for child in found:
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            _kill_group(os.getpgid(child.pid))
            child.kill()


async def run_process(
    cmd: str | Sequence[str],
    env: Mapping[str, str],
    output: ProcessOutput,
    *,
    cwd: str | Path | None = None,
) -> int:
    """Run ``cmd`` (a shell line, or an argument vector run as is) in a new session with
    stdin closed, filling ``output``; its exit status. Its whole group, and any
    descendant that left it, is killed when it exits, on cancellation (a timeout) and, by
    the watchdog, when rolltap dies."""
    spawn = dict(
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(env), cwd=cwd, start_new_session=True,
        preexec_fn=prepare(),
    )  # fmt: skip
    if isinstance(cmd, str):
        process = await asyncio.create_subprocess_shell(cmd, **spawn)  # type: ignore[arg-type]
    else:
        process = await asyncio.create_subprocess_exec(*cmd, **spawn)  # type: ignore[arg-type]
    guard(process.pid)  # killed with its whole group should rolltap die first
    try:
        async with asyncio.TaskGroup() as group:
            if output.on_line is None:
                group.create_task(_tail(process.stdout, output.stdout))
            else:
                group.create_task(_lines(process.stdout, output.stdout, output.on_line))
            group.create_task(_tail(process.stderr, output.stderr))
            returncode = await process.wait()
            _kill_group(process.pid)  # stragglers would hold the pipes open
    finally:
        _kill_tree(process)
        release(process.pid)
        if process.returncode is None:
            await _reap(process)
    return returncode


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Wait for a process killed mid-run (its rollout cancelled) and read its pipes to
    their end: else it stays a zombie and its two pipes stay open, per cancelled rollout,
    for as long as the worker runs. Bounded: a descendant that escaped the kill may still
    hold a pipe."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_S):
            await process.communicate()


def record_output(log: EventLog, output: ProcessOutput, *, stdout: bool = True) -> None:
    """One ``harness_output`` event per non-empty stream (``stdout=False``: stderr only)."""
    streams = (("stdout", output.stdout), ("stderr", output.stderr))
    for name, captured in streams if stdout else streams[1:]:
        if captured.total:
            log.append(
                EventKind.HARNESS_OUTPUT,
                {"stream": name, "text": captured.text(), "bytes": captured.total},
            )
