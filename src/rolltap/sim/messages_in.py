"""Reading and validating Anthropic Messages requests (``/v1/messages`` and count_tokens).

Errors name the field the way the Anthropic API does (``messages.0.role: …``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rolltap.sim.content import BadRequest, Prompt, Tool, Turn, call_turn, text_of

__all__ = ["prompt_for"]

# "system" inside messages: the mid-conversation system messages Claude Code sends (a beta
# the Messages API accepts).
_ROLES = ("user", "assistant", "system")
_CHOICES = ("auto", "any", "tool", "none")


def _system(system: Any) -> Iterator[Turn]:
    if system is None:
        return
    if isinstance(system, str):
        yield ("system", system)
    elif isinstance(system, list) and all(isinstance(b, dict) for b in system):
        yield ("system", text_of(system))
    else:
        raise BadRequest("system: Input should be a string or a list of text blocks")


def _block_turns(role: str, blocks: list[Any], where: str) -> Iterator[Turn]:
    """Text blocks joined into one turn until a tool block interrupts them."""
    texts: list[str] = []
    pending = said = False
    for j, block in enumerate(blocks):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BadRequest(f"{where}.content.{j}: Input should be a content block object")
        kind = block["type"]
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise BadRequest(f"{where}.content.{j}.text: Field required")
            texts.append(block["text"])
            pending = True
            continue
        if kind not in ("tool_use", "tool_result"):
            continue  # images, documents, thinking, unknown kinds: no text the simulator reads
        if pending:
            yield (role, "".join(texts))
            texts.clear()
            pending = False
        said = True
        if kind == "tool_use":
            yield call_turn(block.get("name"), block.get("input"))
        else:
            yield ("tool", text_of(block.get("content")))
    if pending or not said:
        yield (role, "".join(texts))


def _turns(messages: Any) -> Iterator[Turn]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: at least one message is required")
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise BadRequest(f"{where}: Input should be an object")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise BadRequest(f"{where}.role: Input should be 'user', 'assistant' or 'system'")
        if isinstance(content, str):
            yield (role, content)
        elif isinstance(content, list):
            yield from _block_turns(role, content, where)
        else:
            raise BadRequest(f"{where}.content: Input should be a string or a list of blocks")


def _tools(tools: Any) -> tuple[Tool, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise BadRequest("tools: Input should be a valid list")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise BadRequest(f"tools.{i}: Input should be an object")
        if tool.get("type") not in (None, "custom"):
            continue  # server tools (web search, code execution …) never reach the client
        name, schema = tool.get("name"), tool.get("input_schema")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"tools.{i}.name: Field required")
        if not isinstance(schema, dict):
            raise BadRequest(f"tools.{i}.input_schema: Field required")
        out.append(Tool(name, schema))
    return tuple(out)


def _tool_choice(choice: Any) -> tuple[bool, str | None]:
    """(whether tools may be called, the tool the choice names)."""
    if choice is None:
        return True, None
    if not isinstance(choice, dict) or choice.get("type") not in _CHOICES:
        raise BadRequest("tool_choice: Input should be auto, any, tool or none")
    if choice["type"] == "none":
        return False, None
    if choice["type"] != "tool":
        return True, None
    name = choice.get("name")
    if not isinstance(name, str):
        raise BadRequest("tool_choice.name: Field required")
    return True, name


def _max_tokens(body: dict[str, Any]) -> int:
    value = body.get("max_tokens")
    if value is None:
        raise BadRequest("max_tokens: Field required")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest("max_tokens: Input should be an integer greater than or equal to 1")
    return value


def _stop_sequences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadRequest("stop_sequences: Input should be a list of strings")
    return tuple(value)


def prompt_for(body: dict[str, Any], *, generating: bool = True) -> Prompt:
    """The :class:`Prompt` of a Messages request; ``generating=False`` for count_tokens,
    which takes no ``max_tokens``, ``stream`` or ``stop_sequences``."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model: Field required")
    turns = (*_system(body.get("system")), *_turns(body.get("messages")))
    tools = _tools(body.get("tools"))
    allowed, forced = _tool_choice(body.get("tool_choice"))
    if not generating:
        return Prompt(model=model, turns=turns, tools=tools)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream: Input should be a valid boolean")
    return Prompt(
        model=model,
        turns=turns,
        tools=tools,
        tools_allowed=allowed,
        forced_tool=forced,
        max_tokens=_max_tokens(body),
        stop_sequences=_stop_sequences(body.get("stop_sequences")),
        stream=stream,
    )
