"""Codex CLI (``codex``) as a built-in harness: its generated configuration, command line
and the answer in its ``--json`` events.

Each rollout gets ``$CODEX_HOME/config.toml`` (``CODEX_HOME`` in the rollout's fresh
``HOME``) written from nothing: one model provider, ``rolltap``, whose ``base_url`` is
the rollout's ``openai_base_url``, ``wire_api = "responses"`` and ``env_key`` naming
``ROLLTAP_API_KEY`` (the rollout's secret, in the agent's environment only); the model
(the task's or run's ``model``, else the endpoint's); ``approval_policy = "never"``
(headless); the sandbox (``workspace-write`` unless told: its commands may write the
working directory and the temporary directories, nothing else, and reach no network);
no update check, analytics, feedback, history or OpenTelemetry export. The turn is
``codex exec --json --skip-git-repo-check --ephemeral [ARGS…] -- PROMPT`` with stdin
closed; the answer is the text of the last completed ``agent_message`` item.
"""

from __future__ import annotations

import json
from typing import Any

from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.agent_stream import AgentFailedError, EventReader
from rolltap.rollouts.agent_workdir import Workspace
from rolltap.rollouts.harness import HarnessContext

__all__ = ["CodexStream", "codex_command", "codex_config", "codex_env", "write_codex_home"]

#: where the rollout's secret is, for the generated provider's ``env_key``
KEY_VARIABLE = "ROLLTAP_API_KEY"
#: commands may write the working directory and /tmp, nothing else (and no network)
DEFAULT_SANDBOX = "workspace-write"


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, once DEL and the characters past
    the BMP are written as themselves (JSON would give DEL raw and surrogate pairs)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")


def codex_config(model: str, base_url: str, sandbox: str) -> str:
    """The ``config.toml`` of one rollout (top-level keys first, then the tables)."""
    return "\n".join([
        f"model = {_toml_string(model)}",
        'model_provider = "rolltap"',
        'approval_policy = "never"',
        f"sandbox_mode = {_toml_string(sandbox)}",
        "check_for_update_on_startup = false",
        "",
        "[model_providers.rolltap]",
        'name = "rolltap"',
        f"base_url = {_toml_string(base_url)}",
        f'env_key = "{KEY_VARIABLE}"',
        'wire_api = "responses"',
        "",
        "[analytics]\nenabled = false\n",
        "[feedback]\nenabled = false\n",
        '[history]\npersistence = "none"\n',
        '[otel]\nexporter = "none"\n',
    ])  # fmt: skip


def write_codex_home(space: Workspace, ctx: HarnessContext, options: AgentOptions) -> None:
    """Create ``CODEX_HOME`` with the rollout's ``config.toml`` (blocking)."""
    home = space.home / ".codex"
    home.mkdir(exist_ok=True)
    config = codex_config(
        options.model or ctx.model, ctx.openai_base_url, options.sandbox or DEFAULT_SANDBOX
    )
    (home / "config.toml").write_text(config)


def codex_env(ctx: HarnessContext, options: AgentOptions, space: Workspace) -> dict[str, str]:
    """What Codex gets over the rollout's isolated environment."""
    return {"CODEX_HOME": str(space.home / ".codex"), KEY_VARIABLE: ctx.api_key}


def codex_command(binary: str, prompt: str, options: AgentOptions) -> list[str]:
    """The argument vector of one headless turn (the prompt after ``--``)."""
    argv = [binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral"]
    return [*argv, *options.args, "--", prompt]


class CodexStream(EventReader):
    """Reads ``codex exec --json`` events (an :class:`EventReader`)."""

    def __init__(self) -> None:
        self.message: str | None = None
        self.error: str | None = None

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        item = event.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            if item.get("type") == "agent_message":
                self.message = str(item.get("text") or "")
        elif kind == "turn.failed":
            error = event.get("error")
            self.error = str(error.get("message") if isinstance(error, dict) else error)
        elif kind == "error":
            self.error = str(event.get("message"))

    def answer(self, returncode: int, stderr: str) -> str:
        if returncode != 0:
            detail = self.error or stderr[-500:]
            raise AgentFailedError(f"codex exited with status {returncode}: {detail}")
        if self.message is None and self.error is not None:
            raise AgentFailedError(f"codex ended without an answer: {self.error}")
        return self.message or ""
