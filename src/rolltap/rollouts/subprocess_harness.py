"""Run a harness as a command (``--cmd "…"``), e.g. a CLI coding agent.

The command runs through the shell in its own process group, with the rollout's
gateway URLs and secret in its environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``, ``ROLLTAP_MODEL``, ``ROLLTAP_ROLLOUT_ID``),
the task as JSON in ``ROLLTAP_TASK_FILE``, a path to write its answer to in
``ROLLTAP_RESULT_FILE`` and a fresh directory holding the task's ``files`` in
``ROLLTAP_WORKDIR`` (the command itself runs in rolltap's working directory). The answer
is the result file's content when written, else stdout; then the task's ``check``, if
any, runs in ``ROLLTAP_WORKDIR`` (:mod:`rolltap.rollouts.agent_check`). The last 64 KiB
of stdout and stderr are appended to the rollout's log as ``harness_output`` events. On
timeout or cancellation the whole group is killed, with any descendant that left it
(:func:`~rolltap.rollouts.process.run_process`), and so it is when rolltap itself dies,
``kill -9`` included (:mod:`rolltap.proc.guard`).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import orjson

from rolltap.errors import HarnessError
from rolltap.rollouts.agent_check import run_task_check
from rolltap.rollouts.agent_workdir import place_files
from rolltap.rollouts.harness import Harness, HarnessContext, HarnessResult
from rolltap.rollouts.process import ProcessOutput, record_output, run_process
from rolltap.rollouts.tasks import Task

__all__ = ["HarnessExitError", "command_harness"]


class HarnessExitError(HarnessError):
    """The harness command (``--cmd``) exited with a non-zero status; the message ends
    with its last 500 characters of stderr."""

    code = "harness_exited"

    def __init__(self, returncode: int, stderr_tail: str) -> None:
        super().__init__(f"harness command exited with status {returncode}: {stderr_tail[-500:]}")
        self.returncode = returncode


def _env(tmp: Path, ctx: HarnessContext) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OPENAI_BASE_URL=ctx.openai_base_url,
        OPENAI_API_KEY=ctx.api_key,
        ANTHROPIC_BASE_URL=ctx.anthropic_base_url,
        ANTHROPIC_API_KEY=ctx.api_key,
        ROLLTAP_MODEL=ctx.model,
        ROLLTAP_ROLLOUT_ID=ctx.rollout_id,
        ROLLTAP_TASK_FILE=str(tmp / "task.json"),
        ROLLTAP_RESULT_FILE=str(tmp / "result.txt"),
        ROLLTAP_WORKDIR=str(tmp / "work"),
        ROLLTAP_SAMPLING=orjson.dumps(ctx.sampling).decode(),
    )
    return env


def command_harness(command: str) -> Harness:
    """A harness that runs ``command`` (a shell line) for each rollout."""

    async def run_command(task: Task, ctx: HarnessContext) -> HarnessResult:
        with tempfile.TemporaryDirectory(prefix="rolltap-", ignore_cleanup_errors=True) as tmp:
            root = Path(tmp)
            (root / "task.json").write_bytes(orjson.dumps(task.to_dict()))
            (root / "work").mkdir()
            if task.files:
                await asyncio.to_thread(place_files, root / "work", task.files)
            output = ProcessOutput()
            returncode = await run_process(command, _env(root, ctx), output)
            record_output(ctx.log, output)
            if returncode != 0:
                raise HarnessExitError(returncode, output.stderr.text())
            result_file = root / "result.txt"
            if result_file.exists():
                answer = result_file.read_text(errors="replace")
            else:
                answer = output.stdout.text()
            # the check sees what the command left, in rolltap's environment (the
            # rollout's secret is not in it)
            await run_task_check(task, root / "work", dict(os.environ), ctx.log)
            return HarnessResult(answer)

    return run_command
