"""Canonical messages and tools → the ``messages``/``tools`` dicts HF chat templates take.

Hugging Face chat templates read OpenAI-chat-shaped dicts with two differences that
matter: a tool call's ``function.arguments`` is a *dict* (templates ``tojson`` it), and a
tool result is a ``role: "tool"`` message. The mapping:

* system texts → one ``system`` message per run of texts with one role (a text whose
  ``extra["role"]`` is ``"developer"`` keeps that role), texts joined with ``"\\n"``;
* user texts → ``content`` as one string (texts joined with ``"\\n"``, as vLLM does for
  text-only templates); a user message with ``extra["role"]`` keeps that role;
* assistant → ``content`` (None without text), ``reasoning_content`` (the key Qwen3 and
  DeepSeek templates read), ``tool_calls``: ``[{"type": "function", "id", "function":
  {"name", "arguments": dict}}]``. Arguments that are not a JSON object stay the raw
  string: a template may still render them, and for prefix consistency only the
  reply's *length in text* matters, not its re-rendering;
* every :class:`ToolResult` (in a tool or user message) → ``{"role": "tool",
  "tool_call_id", "name", "content"}``, ``name`` looked up from the call it answers.

Images cannot become text-tokenizer ids: they raise :class:`InvalidRequestError`
naming the part. ``is_error`` and extras have no template meaning and are left out.

>>> from rolltap.dialects.canonical import Message, Text, ToolCall
>>> to_template_messages([Message("assistant", (ToolCall("c1", "add", '{"a": 1}'),))])
[{'role': 'assistant', 'content': None, 'tool_calls': [{'type': 'function', 'id': 'c1', \
'function': {'name': 'add', 'arguments': {'a': 1}}}]}]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)
from rolltap.errors import InvalidRequestError

__all__ = ["request_to_template", "to_template_messages", "to_template_tools"]

Json = dict[str, Any]
_SEP = "\n"


def request_to_template(request: Request) -> tuple[list[Json], list[Json] | None]:
    """``(messages, tools)`` for ``apply_chat_template``; tools is None when there are none.

    >>> from rolltap.dialects.canonical import Message, Request, Text
    >>> request_to_template(Request((Message("user", (Text("hi"),)),), system=(Text("Be brief."),)))
    ([{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}], None)
    """
    messages = to_template_messages(request.messages, system=request.system)
    tools = to_template_tools(request.tools) if request.tools else None
    return messages, tools


def to_template_tools(tools: Sequence[Tool]) -> list[Json]:
    """Tools as OpenAI-style function schemas, the shape templates iterate over.

    >>> to_template_tools([Tool("now", parameters={"type": "object", "properties": {}})])
    [{'type': 'function', 'function': {'name': 'now', 'parameters': {'type': 'object', \
'properties': {}}}}]
    """
    out: list[Json] = []
    for tool in tools:
        function: Json = {"name": tool.name}
        if tool.description is not None:
            function["description"] = tool.description
        function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def to_template_messages(messages: Sequence[Message], *, system: Sequence[Text] = ()) -> list[Json]:
    """The conversation as chat-template message dicts (see the module doc for the mapping)."""
    out = _system(system)
    names: dict[str, str] = {}  # call id → tool name, for the results that answer them
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if message.role == "assistant":
            rendered = _assistant(message, where)
            names.update((c["id"], c["function"]["name"]) for c in rendered.get("tool_calls", ()))
            out.append(rendered)
        else:
            out.extend(_results(message, names, where))
            texts = [p for p in message.parts if not isinstance(p, ToolResult)]
            if message.role == "user" and (texts or not message.parts):
                role = message.extra.get("role", "user")  # e.g. a mid-conversation system turn
                out.append({"role": role, "content": _text_of(texts, where)})
    return out


def _system(texts: Sequence[Text]) -> list[Json]:
    out: list[Json] = []
    for text in texts:
        role = text.extra.get("role", "system")
        if out and out[-1]["role"] == role:
            out[-1]["content"] += _SEP + text.text
        else:
            out.append({"role": role, "content": text.text})
    return out


def _text_of(parts: Sequence[object], where: str, key: str = "parts") -> str:
    texts: list[str] = []
    for j, part in enumerate(parts):
        if isinstance(part, Text):
            texts.append(part.text)
        elif isinstance(part, Image):
            raise InvalidRequestError(
                "images cannot be rendered to token ids by a text tokenizer",
                field=f"{where}.{key}[{j}]",
            )
        else:
            raise InvalidRequestError(
                f"a {type(part).__name__} part cannot be rendered here", field=f"{where}.{key}[{j}]"
            )
    return _SEP.join(texts)


def _assistant(message: Message, where: str) -> Json:
    texts: list[Text | Image] = []
    reasoning: list[str] = []
    calls: list[Json] = []
    for j, part in enumerate(message.parts):
        if isinstance(part, Reasoning):
            reasoning.append(part.text)
        elif isinstance(part, ToolCall):
            calls.append(_call(part))
        elif isinstance(part, Text | Image):
            texts.append(part)
        else:
            raise InvalidRequestError(
                "assistant messages hold no tool results", field=f"{where}.parts[{j}]"
            )
    out: Json = {"role": "assistant", "content": _text_of(texts, where) if texts else None}
    if reasoning:
        out["reasoning_content"] = _SEP.join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _call(call: ToolCall) -> Json:
    try:
        arguments: Any = orjson.loads(call.arguments) if call.arguments.strip() else {}
    except orjson.JSONDecodeError:
        arguments = call.arguments
    if not isinstance(arguments, dict):
        arguments = call.arguments
    return {
        "type": "function",
        "id": call.id,
        "function": {"name": call.name, "arguments": arguments},
    }


def _results(message: Message, names: dict[str, str], where: str) -> list[Json]:
    out: list[Json] = []
    for j, part in enumerate(message.parts):
        if isinstance(part, ToolResult):
            result: Json = {"role": "tool", "tool_call_id": part.call_id}
            if part.call_id in names:
                result["name"] = names[part.call_id]
            result["content"] = _text_of(part.content, f"{where}.parts[{j}]", "content")
            out.append(result)
        elif message.role == "tool":
            raise InvalidRequestError(
                "tool messages hold only tool results", field=f"{where}.parts[{j}]"
            )
    return out
