"""A harness by name: the built-ins, the agent CLIs, or ``module:function``.

>>> load_harness("chat").__name__
'chat_harness'
"""

from __future__ import annotations

from rolltap.errors import ConfigError
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.loader import load_callable

__all__ = ["AGENT_HARNESSES", "builtin_harness_names", "load_harness"]

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
