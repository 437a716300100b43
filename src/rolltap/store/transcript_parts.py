"""The entries of one message, input item or response body, in each wire dialect.

Pure functions over the JSON the gateway recorded (``docs/events.md``): OpenAI chat
messages, Anthropic Messages messages and content blocks, OpenAI Responses input and
output items. Shapes off the dialect's schema become a :class:`Marker` with their JSON
rather than an error: a transcript shows whatever was stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rolltap.store.transcript_model import Entry, Marker, Reasoning, Said, ToolCall, ToolResult

__all__ = ["body_entries", "message_entries", "system_entries", "text_of"]

_ROLES = {"system", "developer", "user", "assistant"}


def text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of parts (any dialect)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [_part_text(p) for p in content]
        return "\n".join(t for t in texts if t)
    return "" if content is None else _json(content)


def _part_text(part: Any) -> str:
    if not isinstance(part, Mapping):
        return str(part)
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if part.get("type") in ("image", "image_url", "input_image"):
        return "[image]"
    if isinstance(part.get("refusal"), str):
        return f"[refusal] {part['refusal']}"
    return _json(part)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _arguments(value: Any) -> str:
    """Tool arguments as JSON text: chat and Responses send text, Anthropic an object."""
    return value if isinstance(value, str) else _json(value if value is not None else {})


def system_entries(dialect: str | None, params: Mapping[str, Any]) -> list[Entry]:
    """The system prompt a request carries outside its messages (Anthropic ``system``,
    Responses ``instructions``)."""
    key = {"messages": "system", "responses": "instructions"}.get(dialect or "")
    value = params.get(key) if key else None
    text = text_of(value) if value else ""
    return [Said("system", text)] if text else []


def message_entries(dialect: str | None, message: Any) -> list[Entry]:
    """The entries of one recorded request message (or Responses input item)."""
    if not isinstance(message, Mapping):
        return [Marker("message", _json(message))]
    if dialect == "responses" or message.get("type") not in (None, "message"):
        return _item_entries(message)
    if dialect == "messages":
        return _blocks(message.get("role", "user"), message.get("content"))
    return _chat_message(message)


def _chat_message(m: Mapping[str, Any]) -> list[Entry]:
    role = m.get("role", "?")
    if role in ("tool", "function"):
        call_id = m.get("tool_call_id")
        name = m.get("name")
        return [ToolResult(text_of(m.get("content")), call_id, name)]
    if role == "assistant":
        return _chat_reply(m)
    return [Said(role, text_of(m.get("content")))]


def _chat_reply(m: Mapping[str, Any]) -> list[Entry]:
    out: list[Entry] = []
    reasoning = m.get("reasoning_content") or m.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        out.append(Reasoning(reasoning))
    text = text_of(m.get("content"))
    if isinstance(m.get("refusal"), str):
        text = (text + "\n" if text else "") + f"[refusal] {m['refusal']}"
    if text:
        out.append(Said("assistant", text))
    for call in m.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        name, arguments = str(fn.get("name", "?")), _arguments(fn.get("arguments"))
        out.append(ToolCall(name, arguments, call.get("id")))
    return out


def _blocks(role: str, content: Any) -> list[Entry]:
    """An Anthropic message's content: a string or a list of blocks."""
    if not isinstance(content, list):
        return [Said(role, text_of(content))]
    out: list[Entry] = []
    for block in content:
        out.extend(_block(role, block))
    return out


def _block(role: str, b: Any) -> list[Entry]:
    kind = b.get("type") if isinstance(b, Mapping) else None
    if kind == "tool_use":
        return [ToolCall(str(b.get("name", "?")), _arguments(b.get("input")), b.get("id"))]
    if kind == "tool_result":
        text = text_of(b.get("content"))
        return [ToolResult(text, b.get("tool_use_id"), is_error=bool(b.get("is_error")))]
    if kind == "thinking":
        return [Reasoning(str(b.get("thinking", "")))]
    if kind == "redacted_thinking":
        return [Reasoning("", redacted=True)]
    return [Said(role, _part_text(b))]


def _item_entries(item: Mapping[str, Any]) -> list[Entry]:
    """A Responses input or output item."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role", "user")
        return [Said(role if role in _ROLES else str(role), text_of(item.get("content")))]
    if kind == "function_call":
        name, call_id = str(item.get("name", "?")), item.get("call_id")
        return [ToolCall(name, _arguments(item.get("arguments")), call_id)]
    if kind == "function_call_output":
        return [ToolResult(text_of(item.get("output")), item.get("call_id"))]
    if kind == "reasoning":
        texts = [_part_text(p) for p in item.get("summary") or item.get("content") or ()]
        text = "\n\n".join(t for t in texts if t)
        return [Reasoning(text, redacted=not text and bool(item.get("encrypted_content")))]
    return [Marker(str(kind), _json(dict(item)))]


def body_entries(payload: Mapping[str, Any]) -> list[Entry]:
    """The output of a ``model_response`` payload: its ``message`` (a token client's
    answer parsed from the raw completion in ``body``, or a message recorded alone), else
    its ``body`` (in the upstream's dialect, streams folded into body shape; each
    dialect's body has its own top-level key)."""
    message, body = payload.get("message"), payload.get("body")
    if isinstance(message, Mapping):
        return _chat_reply(message)
    if not isinstance(body, Mapping):
        return []
    if "choices" in body:
        return _choice(body.get("choices") or [{}])
    if "output" in body:
        out: list[Entry] = []
        for item in body.get("output") or ():
            out.extend(_item_entries(item) if isinstance(item, Mapping) else [])
        return out
    if isinstance(body.get("content"), str):  # llama.cpp /completion (the token client)
        return [Said("assistant", body["content"])]
    return _blocks("assistant", body.get("content"))


def _choice(choices: list[Any]) -> list[Entry]:
    """A chat answer's message, or a completions answer's text (the token client)."""
    first = choices[0] if isinstance(choices[0], Mapping) else {}
    message = first.get("message")
    if isinstance(message, Mapping):
        return _chat_reply(message)
    text = first.get("text")
    return [Said("assistant", text)] if isinstance(text, str) and text else []
