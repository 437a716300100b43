"""Reading ``POST /v1/chat/completions`` requests into a :class:`~rolltap.sim.content.Prompt`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rolltap.sim.config import SimConfig
from rolltap.sim.content import BadRequest, Prompt, Tool, Turn, call_turn, text_of

__all__ = ["prompt_for"]


def _turns(message: dict[str, Any]) -> Iterator[Turn]:
    role = message.get("role")
    role = "system" if role == "developer" else role if isinstance(role, str) else ""
    yield (role, text_of(message.get("content")))
    calls = message.get("tool_calls") if role == "assistant" else None
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            yield call_turn(function.get("name"), function.get("arguments"))


def _cap(body: dict[str, Any]) -> int | None:
    caps = [body.get("max_tokens"), body.get("max_completion_tokens")]
    limits = [c for c in caps if isinstance(c, int) and not isinstance(c, bool)]
    if any(c < 0 for c in limits):
        raise BadRequest("max_tokens: must not be negative")
    return min(limits, default=None)


def _tools(body: dict[str, Any]) -> tuple[Tool, ...]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    functions = [t.get("function") for t in tools if isinstance(t, dict)]
    return tuple(
        Tool(str(f.get("name") or "tool"), f.get("parameters"))
        for f in functions
        if isinstance(f, dict)
    )


def _forced_tool(choice: Any) -> str | None:
    named = choice.get("function") if isinstance(choice, dict) else None
    name = named.get("name") if isinstance(named, dict) else None
    return name if isinstance(name, str) else None


def prompt_for(body: dict[str, Any], config: SimConfig) -> Prompt:
    """The :class:`Prompt` of a chat-completions request body."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages: required, must be a list")
    turns: list[Turn] = []
    for message in messages:
        if not isinstance(message, dict):
            raise BadRequest("messages: every message must be an object")
        turns.extend(_turns(message))
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return Prompt(
        model=str(body.get("model") or config.model),
        turns=tuple(turns),
        tools=_tools(body),
        tools_allowed=body.get("tool_choice") != "none",
        forced_tool=_forced_tool(body.get("tool_choice")),
        max_tokens=_cap(body),
        stop_sequences=tuple(s for s in stops if isinstance(s, str)),
        logprobs=body.get("logprobs") is True,
        stream=body.get("stream") is True,
    )
