"""Run a harness as a command (``--cmd "…"``), e.g. a CLI coding agent.

The command runs through the shell in its own process group, with the rollout's
gateway URLs and secret in its environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``, ``ROLLTAP_MODEL``, ``ROLLTAP_ROLLOUT_ID``),
the task as JSON in ``ROLLTAP_TASK_FILE`` and a path to write its answer to in
``ROLLTAP_RESULT_FILE``. The answer is that file's content when written, else stdout.
The last 64 KiB of stdout and stderr are appended to the rollout's log as
``harness_output`` events. On timeout or cancellation the whole group is killed, and
so it is when rolltap itself dies, ``kill -9`` included (:mod:`rolltap.proc.guard`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from pathlib import Path

import orjson

from rolltap.proc import guard, prepare, release
from rolltap.rollouts.harness import Harness, HarnessContext, HarnessResult
from rolltap.rollouts.tasks import Task
from rolltap.store import EventKind

__all__ = ["HarnessExitError", "command_harness"]

#: how much of each output stream is kept
OUTPUT_LIMIT = 64 * 1024
_CHUNK = 16 * 1024


class HarnessExitError(RuntimeError):
    """The harness command exited with a non-zero status."""

    def __init__(self, returncode: int, stderr_tail: str) -> None:
        super().__init__(f"harness command exited with status {returncode}: {stderr_tail[-500:]}")
        self.returncode = returncode


async def _tail(stream: asyncio.StreamReader | None) -> tuple[bytes, int]:
    """Read a stream to its end keeping its last ``OUTPUT_LIMIT`` bytes; (tail, total)."""
    if stream is None:
        return b"", 0
    kept = bytearray()
    total = 0
    while chunk := await stream.read(_CHUNK):
        total += len(chunk)
        kept += chunk
        if len(kept) > OUTPUT_LIMIT:
            del kept[: len(kept) - OUTPUT_LIMIT]
    return bytes(kept), total


def _env(task_file: Path, result_file: Path, ctx: HarnessContext) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OPENAI_BASE_URL=ctx.openai_base_url,
        OPENAI_API_KEY=ctx.api_key,
        ANTHROPIC_BASE_URL=ctx.anthropic_base_url,
        ANTHROPIC_API_KEY=ctx.api_key,
        ROLLTAP_MODEL=ctx.model,
        ROLLTAP_ROLLOUT_ID=ctx.rollout_id,
        ROLLTAP_TASK_FILE=str(task_file),
        ROLLTAP_RESULT_FILE=str(result_file),
        ROLLTAP_SAMPLING=orjson.dumps(ctx.sampling).decode(),
    )
    return env


def _kill_group(pgid: int) -> None:
    """Kill whatever is left of the command's process group (its own session)."""
    # ProcessLookupError: the whole group is gone already, nothing to kill.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


async def _run(command: str, env: dict[str, str], ctx: HarnessContext) -> tuple[int, bytes]:
    process = await asyncio.create_subprocess_shell(
        command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
        preexec_fn=prepare(),
    )
    guard(process.pid)  # killed with its whole group should rolltap die first
    try:
        async with asyncio.TaskGroup() as group:
            out = group.create_task(_tail(process.stdout))
            err = group.create_task(_tail(process.stderr))
            returncode = await process.wait()
            _kill_group(process.pid)  # stragglers would hold the pipes open
    finally:
        _kill_group(process.pid)
        release(process.pid)
    for stream, (data, total) in (("stdout", out.result()), ("stderr", err.result())):
        if total:
            ctx.log.append(
                EventKind.HARNESS_OUTPUT,
                {"stream": stream, "text": data.decode(errors="replace"), "bytes": total},
            )
    if returncode != 0:
        raise HarnessExitError(returncode, err.result()[0].decode(errors="replace"))
    return returncode, out.result()[0]


def command_harness(command: str) -> Harness:
    """A harness that runs ``command`` (a shell line) for each rollout."""

    async def run_command(task: Task, ctx: HarnessContext) -> HarnessResult:
        with tempfile.TemporaryDirectory(prefix="rolltap-") as tmp:
            task_file, result_file = Path(tmp) / "task.json", Path(tmp) / "result.txt"
            task_file.write_bytes(orjson.dumps(task.to_dict()))
            _, stdout = await _run(command, _env(task_file, result_file, ctx), ctx)
            if result_file.exists():
                return HarnessResult(result_file.read_text(errors="replace"))
            return HarnessResult(stdout.decode(errors="replace"))

    return run_command
