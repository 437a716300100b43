"""A task's ``check``: a shell command run in the rollout's working directory once the
harness exited (successfully), judging what the agent left there.

It runs through ``/bin/sh -c`` in its own session with stdin closed, in the environment
the harness gives it (an agent's: the rollout's fresh ``HOME``, no secret), for at most
the task's ``check_timeout_s`` (default 60 s; then its whole group is killed). Its
outcome is one ``check`` event in the rollout's log::

    {"kind": "check", "payload": {"command": "test -f hello.txt", "exit_code": 0,
      "passed": true, "timed_out": false, "timeout_s": 60.0, "duration_s": 0.004,
      "stdout": "", "stderr": "", "stdout_bytes": 0, "stderr_bytes": 0}}

and the ``check`` reward (:mod:`rolltap.rollouts.rewards`) reads it: 1.0 when it passed
(exit status 0), else 0.0.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rolltap.events import EventKind, EventLog
from rolltap.rollouts.process import ProcessOutput, run_process
from rolltap.rollouts.tasks import Task

__all__ = ["DEFAULT_CHECK_TIMEOUT_S", "run_check", "run_task_check"]

DEFAULT_CHECK_TIMEOUT_S = 60.0


async def run_check(
    command: str, cwd: Path, env: Mapping[str, str], timeout_s: float
) -> dict[str, Any]:
    """Run ``command`` in ``cwd``; the ``check`` event's payload (see the module docstring)."""
    output = ProcessOutput()
    returncode: int | None = None
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout_s):
            returncode = await run_process(command, env, output, cwd=cwd)
    except TimeoutError:
        # its group was killed and it did not pass; the rollout's own timeout and a
        # cancellation arrive here as CancelledError and go on up
        returncode = None
    return {
        "command": command,
        "exit_code": returncode,
        "passed": returncode == 0,
        "timed_out": returncode is None,
        "timeout_s": timeout_s,
        "duration_s": round(time.monotonic() - started, 6),
        "stdout": output.stdout.text(),
        "stderr": output.stderr.text(),
        "stdout_bytes": output.stdout.total,
        "stderr_bytes": output.stderr.total,
    }


async def run_task_check(
    task: Task, cwd: Path, env: Mapping[str, str], log: EventLog
) -> bool | None:
    """Run ``task``'s check, if it has one, and record its ``check`` event; whether it
    passed (``None``: no check)."""
    if task.check is None:
        return None
    timeout = task.check_timeout_s or DEFAULT_CHECK_TIMEOUT_S
    payload = await run_check(task.check, cwd, env, timeout)
    log.append(EventKind.CHECK, payload)
    return bool(payload["passed"])
