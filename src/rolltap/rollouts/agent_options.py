"""The flags of the built-in agent harnesses (``claude-code``, ``codex``).

They come from the run's ``[harness]`` table (stored with the run as
``harness_options``) and from a task's own ``harness`` object, which wins field by field:

>>> run = AgentOptions(max_turns=8, allowed_tools=["Bash"])
>>> run.merged(AgentOptions(max_turns=2)).max_turns, run.merged(None).allowed_tools
(2, ['Bash'])

Every field is optional; ``None`` is the agent's default (see :mod:`rolltap.rollouts.agents`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["AgentOptions", "options_from"]

#: Codex's sandbox modes (``codex exec --sandbox``)
Sandbox = Literal["read-only", "workspace-write", "danger-full-access"]


class AgentOptions(BaseModel):
    """What to tell the agent CLI; ``None`` everywhere means its defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the model name the agent sends (the gateway rewrites it to the endpoint's);
    #: Claude Code: its own default; Codex: the endpoint's model
    model: str | None = Field(default=None, min_length=1)
    #: Claude Code's ``--max-turns`` (agent turns); the gateway's ``max_turns`` limit
    #: counts model calls and applies to every harness
    max_turns: int | None = Field(default=None, gt=0, le=10_000)
    #: Claude Code's ``--allowedTools`` (e.g. ``["Bash", "Edit", "Read"]``)
    allowed_tools: list[str] | None = None
    #: Claude Code's ``--permission-mode`` (default ``bypassPermissions``: headless, in a
    #: fresh working directory, nobody is there to approve a tool)
    permission_mode: (
        Literal["acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"] | None
    ) = None
    #: Codex's sandbox for the commands it runs (default ``workspace-write``)
    sandbox: Sandbox | None = None
    #: more arguments for the agent, placed before the prompt
    args: list[str] = Field(default_factory=list)
    #: more environment variables for the agent (over rolltap's; e.g. CLAUDE_CODE_MAX_RETRIES)
    env: dict[str, str] = Field(default_factory=dict)

    def is_set(self) -> bool:
        """Whether any field differs from the default (a stored run has every field)."""
        return self != AgentOptions()

    def merged(self, task: AgentOptions | None) -> AgentOptions:
        """These options with ``task``'s set fields over them (``env`` merged by key)."""
        if task is None or not task.is_set():
            return self
        over = {k: v for k, v in task.model_dump().items() if v not in (None, [], {})}
        if "env" in over:
            over["env"] = {**self.env, **task.env}
        return self.model_copy(update=over)


def options_from(value: Any, where: str) -> AgentOptions | None:
    """A task's ``harness`` object as options (``None`` when absent); ``ValueError`` naming
    the bad field otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"'{where}' must be an object")
    try:
        return AgentOptions.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{where}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(problems) from exc
