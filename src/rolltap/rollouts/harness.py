"""The harness API: what a harness is given and what it returns, and how one is loaded.

A harness is ``async def harness(task: Task, ctx: HarnessContext) -> str | HarnessResult``.
It talks to the model only through the rollout's gateway URLs in ``ctx``; the runner
turns what it returns (or raises) into the rollout's answer and status.

>>> load_harness("chat").__name__
'chat_harness'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

from rolltap.errors import ConfigError
from rolltap.events import EventLog
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.loader import load_callable
from rolltap.rollouts.tasks import Task

__all__ = ["AGENT_HARNESSES", "Harness", "HarnessContext", "HarnessResult", "load_harness"]


@dataclass(frozen=True, slots=True)
class HarnessContext:
    """Where a harness sends its model calls, and the rollout it belongs to.

    ``api_key`` is the rollout's gateway secret (not an upstream credential).
    ``sampling`` holds the run's sampling overrides (the gateway applies them to every
    request; harnesses may pass them too). ``log`` is the rollout's event log: a harness
    may append its own events (e.g. ``harness_output``). ``http_client`` is this rollout's
    HTTP client, owned and closed by the runner and cheap to build (it shares one TLS
    context): pass it to an SDK (``AsyncOpenAI(http_client=ctx.http_client)``) rather
    than letting the SDK build its own, which loads the CA store (tens of ms of CPU) and
    convoys a wave of thousands of rollouts (see
    :func:`rolltap.rollouts.builtin.openai_client`).
    """

    rollout_id: str
    openai_base_url: str
    anthropic_base_url: str
    api_key: str
    model: str
    sampling: dict[str, Any] = field(default_factory=dict)
    log: EventLog = field(default_factory=EventLog)
    timeout_s: float | None = None
    http_client: httpx2.AsyncClient | None = None


@dataclass(frozen=True, slots=True)
class HarnessResult:
    """A harness's answer, with optional extra info kept in the rollout's result."""

    answer: str
    info: dict[str, Any] = field(default_factory=dict)


Harness = Callable[[Task, HarnessContext], Awaitable["str | HarnessResult"]]

#: the built-in agent harnesses: real CLI agents run as processes with a shell of their own
#: (:mod:`rolltap.rollouts.agents`); a serve allowlist must name them
AGENT_HARNESSES = frozenset({"claude-code", "codex"})


def _builtins() -> dict[str, Harness]:
    from rolltap.rollouts.builtin import chat_harness, tool_agent_harness
    from rolltap.rollouts.builtin_messages import messages_tool_agent_harness

    return {
        "chat": chat_harness,
        "tool-agent": tool_agent_harness,
        "messages-tool-agent": messages_tool_agent_harness,
    }


def builtin_harness_names() -> frozenset[str]:
    """The names of the built-in harnesses, the agents (:data:`AGENT_HARNESSES`) among
    them; a serve allowlist always admits the others."""
    return frozenset(_builtins()) | AGENT_HARNESSES


def load_harness(spec: str, options: AgentOptions | None = None) -> Harness:
    """A built-in harness by name (``chat``, ``tool-agent``, ``messages-tool-agent``,
    ``claude-code``, ``codex``) or ``module:function``. ``options`` (the run's
    ``[harness]`` table) are for the agent harnesses only; an agent's CLI that is not
    installed is a :class:`~rolltap.errors.MissingAgentError`."""
    if spec in AGENT_HARNESSES:
        from rolltap.rollouts.agents import agent_harness

        return agent_harness(spec, options)
    if options is not None and options.is_set():
        agents = ", ".join(sorted(AGENT_HARNESSES))
        raise ConfigError(f"[harness] options are for the agent harnesses ({agents}), not {spec!r}")
    builtins = {**_builtins(), **dict.fromkeys(AGENT_HARNESSES)}  # named in the error
    harness: Harness = load_callable(spec, builtins, "harness")
    return harness


def answer_of(result: object) -> HarnessResult:
    """Normalise what a harness returned; raises ``TypeError`` for anything else."""
    if isinstance(result, HarnessResult):
        return result
    if isinstance(result, str):
        return HarnessResult(result)
    raise TypeError(f"a harness must return str or HarnessResult, not {type(result).__name__}")
