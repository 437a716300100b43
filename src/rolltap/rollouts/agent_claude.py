"""Claude Code (``claude``) as a built-in harness: its command line, environment and
the answer in its ``stream-json`` output.

One headless turn: ``claude -p --output-format stream-json --verbose
--no-session-persistence --permission-mode MODE [--model M] [--max-turns N]
[--allowedTools T,…] [ARGS…] -- PROMPT``, with ``ANTHROPIC_BASE_URL`` the rollout's
``anthropic_base_url``, ``ANTHROPIC_API_KEY`` its secret, and telemetry, error
reporting, auto-update and other non-essential traffic off. Its answer is the
``result`` of its last ``{"type": "result"}`` event; one with ``is_error`` (a turn
limit, an API error) fails the rollout, naming its ``subtype`` and errors.
"""

from __future__ import annotations

import os
from typing import Any

from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.agent_stream import AgentFailedError, EventReader
from rolltap.rollouts.agent_workdir import Workspace
from rolltap.rollouts.harness import HarnessContext

__all__ = ["ClaudeStream", "claude_command", "claude_env"]

#: headless, in a fresh working directory, nobody is there to approve a tool
DEFAULT_PERMISSION_MODE = "bypassPermissions"
#: what Claude Code reads to turn off everything but the model calls
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def claude_command(binary: str, prompt: str, options: AgentOptions) -> list[str]:
    """The argument vector of one headless turn (the prompt after ``--``, so a prompt
    that starts with ``-`` stays a prompt)."""
    mode = options.permission_mode or DEFAULT_PERMISSION_MODE
    argv = [binary, "-p", "--output-format", "stream-json", "--verbose",
            "--no-session-persistence", "--permission-mode", mode]  # fmt: skip
    if options.model is not None:
        argv += ["--model", options.model]
    if options.max_turns is not None:
        argv += ["--max-turns", str(options.max_turns)]
    if options.allowed_tools is not None:
        argv += ["--allowedTools", ",".join(options.allowed_tools)]
    return [*argv, *options.args, "--", prompt]


def claude_env(ctx: HarnessContext, options: AgentOptions, space: Workspace) -> dict[str, str]:
    """What Claude Code gets over the rollout's isolated environment."""
    env = {"ANTHROPIC_BASE_URL": ctx.anthropic_base_url, "ANTHROPIC_API_KEY": ctx.api_key,
           **QUIET}  # fmt: skip
    mode = options.permission_mode or DEFAULT_PERMISSION_MODE
    if mode == "bypassPermissions" and os.geteuid() == 0:
        # Claude Code refuses to skip permissions as root unless told it is sandboxed
        # (containers run as root); its HOME and working directory are the rollout's
        env["IS_SANDBOX"] = "1"
    return env


class ClaudeStream(EventReader):
    """Reads Claude Code's ``stream-json`` events (an :class:`EventReader`)."""

    def __init__(self) -> None:
        self.result: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> None:
        if event.get("type") == "result":
            self.result = event

    def answer(self, returncode: int, stderr: str) -> str:
        """The final message; ``AgentFailedError`` when the turn failed."""
        result = self.result
        if result is None:
            raise AgentFailedError(
                f"claude exited with status {returncode} without a result: {stderr[-500:]}"
            )
        if result.get("is_error") or returncode != 0:
            errors = result.get("errors") or [result.get("result") or stderr[-500:]]
            detail = "; ".join(str(e) for e in errors)
            raise AgentFailedError(
                f"claude ended with {result.get('subtype', 'an error')} "
                f"(status {returncode}): {detail}"
            )
        return str(result.get("result") or "")
