"""A harness by name: the built-ins, the agent CLIs, or ``module:function``.

A built-in's module is imported when a run first names it: each brings its SDK (OpenAI's,
Anthropic's), a second or more of CPU, and a run of ``chat`` needs only OpenAI's. A
worker imports the ones its runs will name before it says ready
(:func:`preload_harnesses`).

>>> load_harness("chat").__name__
'chat_harness'
>>> sorted(builtin_harness_names())[:2]
['chat', 'claude-code']
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping

from rolltap.errors import ConfigError
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.loader import load_callable

__all__ = ["AGENT_HARNESSES", "builtin_harness_names", "load_harness", "preload_harnesses"]

#: the built-in agent harnesses: real CLI agents run as processes with a shell of their own
#: (:mod:`rolltap.rollouts.agents`); a serve allowlist must name them
AGENT_HARNESSES = frozenset({"claude-code", "codex"})

#: the other built-ins: name -> (module, function)
_BUILTINS: Mapping[str, tuple[str, str]] = {
    "chat": ("rolltap.rollouts.builtin", "chat_harness"),
    "tool-agent": ("rolltap.rollouts.builtin", "tool_agent_harness"),
    "messages-tool-agent": ("rolltap.rollouts.builtin_messages", "messages_tool_agent_harness"),
}
_AGENTS_MODULE = "rolltap.rollouts.agents"


def builtin_harness_names() -> frozenset[str]:
    """The names of the built-in harnesses, the agents (:data:`AGENT_HARNESSES`) among
    them; a serve allowlist always admits the others. Imports none of them."""
    return frozenset(_BUILTINS) | AGENT_HARNESSES


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
    builtin = _BUILTINS.get(spec)
    if builtin is not None:
        module, name = builtin
        found: Harness = getattr(importlib.import_module(module), name)
        return found
    harness: Harness = load_callable(spec, dict.fromkeys(builtin_harness_names()), "harness")
    return harness


def preload_harnesses(specs: Iterable[str] | None = None) -> None:
    """Import the built-in harnesses named in ``specs`` (None: every one) with their
    SDKs, so that a worker's first rollouts do not wait for the import on a blocked
    loop. Other names are left to their first use (a ``module:function`` is the
    caller's code, imported when a rollout names it)."""
    names = set(builtin_harness_names() if specs is None else specs)
    modules = {_BUILTINS[name][0] for name in names & _BUILTINS.keys()}
    if names & AGENT_HARNESSES:
        modules.add(_AGENTS_MODULE)
    for module in sorted(modules):
        importlib.import_module(module)
