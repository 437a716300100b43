"""The built-in agent harnesses: Claude Code (``claude-code``) and Codex CLI (``codex``),
run unmodified, one headless turn per rollout.

Per rollout (:func:`agent_harness`): a fresh working directory holding the task's
``files`` and a fresh ``HOME`` (:mod:`rolltap.rollouts.agent_workdir`), an environment
built from nothing but ``PATH`` and the locale, the rollout's gateway URL and secret
(:mod:`~rolltap.rollouts.agent_claude`, :mod:`~rolltap.rollouts.agent_codex`), the
task's prompt as the turn; every line the agent prints is a ``harness_output`` event, its
final message is the answer, then the task's ``check`` runs in the working directory
(:mod:`rolltap.rollouts.agent_check`). The agent runs in its own session; on timeout,
cancellation or rolltap's death it is killed with everything it started
(:func:`~rolltap.rollouts.process.run_process`).

The binary is ``ROLLTAP_CLAUDE`` / ``ROLLTAP_CODEX`` when set, else ``claude`` /
``codex`` on ``PATH``; without it the harness is not built
(:class:`~rolltap.errors.MissingAgentError`, before a run is created).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rolltap.errors import ConfigError, MissingAgentError
from rolltap.rollouts.agent_check import run_task_check
from rolltap.rollouts.agent_claude import ClaudeStream, claude_command, claude_env
from rolltap.rollouts.agent_codex import CodexStream, codex_command, codex_env, write_codex_home
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.agent_stream import EventReader, LineRecorder
from rolltap.rollouts.agent_workdir import Workspace, isolated_env, workspace
from rolltap.rollouts.harness import Harness, HarnessContext, HarnessResult
from rolltap.rollouts.process import ProcessOutput, record_output, run_process
from rolltap.rollouts.tasks import Task

__all__ = ["AGENT_KINDS", "AgentKind", "agent_harness", "find_agent", "prompt_of"]


def _no_setup(space: Workspace, ctx: HarnessContext, options: AgentOptions) -> None:
    return None


@dataclass(frozen=True, slots=True)
class AgentKind:
    """One agent CLI: where it comes from and how one turn of it is run."""

    name: str
    binary: str
    variable: str
    package: str
    command: Callable[[str, str, AgentOptions], list[str]]
    env: Callable[[HarnessContext, AgentOptions, Workspace], dict[str, str]]
    reader: Callable[[], EventReader]
    #: the options this CLI has no flag for
    unsupported: tuple[str, ...]
    #: writes what the agent reads in its home (blocking; run off the loop)
    setup: Callable[[Workspace, HarnessContext, AgentOptions], None] = _no_setup


AGENT_KINDS: dict[str, AgentKind] = {
    "claude-code": AgentKind(
        "claude-code", "claude", "ROLLTAP_CLAUDE", "@anthropic-ai/claude-code",
        claude_command, claude_env, ClaudeStream, unsupported=("sandbox",),
    ),
    "codex": AgentKind(
        "codex", "codex", "ROLLTAP_CODEX", "@openai/codex", codex_command, codex_env,
        CodexStream,
        unsupported=("max_turns", "allowed_tools", "permission_mode"),
        setup=write_codex_home,
    ),
}  # fmt: skip


def find_agent(kind: AgentKind) -> str:
    """The agent's executable: ``$ROLLTAP_…`` when set, else its name on ``PATH``;
    ``MissingAgentError`` when there is none."""
    given = os.environ.get(kind.variable)
    found = shutil.which(given or kind.binary)
    if found is None:
        raise MissingAgentError.for_agent(
            kind.name, kind.binary, kind.variable, kind.package, given=given or None
        )
    return found


def check_options(kind: AgentKind, options: AgentOptions) -> None:
    """``ConfigError`` for an option ``kind``'s CLI has no flag for."""
    given = [name for name in kind.unsupported if getattr(options, name) is not None]
    if given:
        raise ConfigError(
            f"the {kind.name} harness has no {', '.join(given)} option (see docs/agents.md)"
        )


def prompt_of(task: Task) -> str:
    """The turn's prompt: the task's ``prompt``, else its last user message's text."""
    if task.prompt is not None:
        return task.prompt
    for message in reversed(task.messages or []):
        if message.get("role") == "user":
            return _text(message.get("content"))
    raise ValueError("an agent task needs a prompt or a user message")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )  # fmt: skip
    return "" if content is None else str(content)


def agent_harness(name: str, options: AgentOptions | None = None) -> Harness:
    """The harness of agent ``name`` (a key of :data:`AGENT_KINDS`) with the run's
    ``options`` (a task's own ``harness`` options win); checks the binary and options now."""
    kind = AGENT_KINDS[name]
    run_options = options or AgentOptions()
    check_options(kind, run_options)
    binary = find_agent(kind)

    async def run_agent(task: Task, ctx: HarnessContext) -> HarnessResult:
        opts = run_options.merged(task.harness)
        check_options(kind, opts)
        prompt = prompt_of(task)
        async with workspace(task.files) as space:
            await asyncio.to_thread(kind.setup, space, ctx, opts)
            env = isolated_env(space, {**kind.env(ctx, opts, space), **opts.env})
            reader = kind.reader()
            output = ProcessOutput(on_line=LineRecorder(ctx.log, reader))
            argv = kind.command(binary, prompt, opts)
            returncode = await run_process(argv, env, output, cwd=space.work)
            record_output(ctx.log, output, stdout=False)  # stdout: one event a line
            answer = reader.answer(returncode, output.stderr.text())
            # the check sees the directory the agent left, with neither its secret nor
            # its configuration
            await run_task_check(task, space.work, isolated_env(space), ctx.log)
            return HarnessResult(answer, info={"agent": kind.name})

    run_agent.__name__ = run_agent.__qualname__ = f"{name.replace('-', '_')}_harness"
    return run_agent
