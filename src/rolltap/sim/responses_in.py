"""Reading and validating OpenAI Responses requests (``POST /v1/responses``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rolltap.sim.content import BadRequest, Prompt, Tool, Turn, call_turn, text_of

__all__ = ["prompt_for"]

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _item_turns(i: int, item: Any) -> Iterator[Turn]:
    if not isinstance(item, dict):
        raise BadRequest(f"input[{i}]: expected an object")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        role = _ROLES.get(role) if isinstance(role, str) else None
        content = item.get("content")
        if role is None:
            raise BadRequest(f"input[{i}].role: expected user, assistant, system or developer")
        if not isinstance(content, str | list):
            raise BadRequest(f"input[{i}].content: expected a string or a list of parts")
        yield (role, text_of(content))
    elif kind == "function_call":
        yield call_turn(item.get("name"), item.get("arguments"))
    elif kind == "function_call_output":
        yield ("tool", text_of(item.get("output")))
    elif not isinstance(kind, str):
        raise BadRequest(f"input[{i}].type: required")
    # Other items (reasoning, web search calls, references …) carry no text the simulator reads.


def _turns(body: dict[str, Any]) -> Iterator[Turn]:
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        yield ("system", instructions)
    elif instructions is not None:
        raise BadRequest("instructions: expected a string")
    given = body.get("input")
    if isinstance(given, str):
        yield ("user", given)
    elif isinstance(given, list):
        for i, item in enumerate(given):
            yield from _item_turns(i, item)
    else:
        raise BadRequest("input: required, a string or a list of items")


def _tools(tools: Any) -> tuple[Tool, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise BadRequest("tools: expected an array")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise BadRequest(f"tools[{i}]: expected an object")
        if tool.get("type") != "function":
            continue  # hosted tools (web search, file search …) run on the server's side
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"tools[{i}].name: required")
        out.append(Tool(name, tool.get("parameters")))
    return tuple(out)


def _tool_choice(choice: Any) -> tuple[bool, str | None]:
    """(whether tools may be called, the function the choice names)."""
    if choice == "none":
        return False, None
    name = choice.get("name") if isinstance(choice, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(name, str):
        return True, name
    return True, None


def _cap(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest("max_output_tokens: expected a non-negative integer")
    return value


def prompt_for(body: dict[str, Any]) -> Prompt:
    """The :class:`Prompt` of a Responses request body."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model: required")
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        raise BadRequest("stream: expected a boolean")
    allowed, forced = _tool_choice(body.get("tool_choice"))
    return Prompt(
        model=model,
        turns=tuple(_turns(body)),
        tools=_tools(body.get("tools")),
        tools_allowed=allowed,
        forced_tool=forced,
        max_tokens=_cap(body.get("max_output_tokens")),
        stream=stream is True,
    )
