"""The entries of one recorded message, input item or response body, in each wire dialect.

Each message is read by its dialect's own parser into the canonical model
(:mod:`rolltap.exports.recorded`, tolerant: it never raises), and its canonical parts
become entries: texts a :class:`Said` (a chat message or Responses item's texts joined
into one, an Anthropic block each its own), reasoning, tool calls and tool results
theirs. What does not parse is a :class:`Marker` with its JSON: a transcript shows
whatever was stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rolltap.dialects import canonical as c
from rolltap.exports.recorded import read_message, read_system
from rolltap.exports.transcript_model import (
    Entry,
    Marker,
    ReasoningEntry,
    Said,
    ToolCallEntry,
    ToolResultEntry,
)

__all__ = ["body_entries", "message_entries", "system_entries"]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _raw(message: Any) -> Marker:
    """A message that does not parse, as stored (a Responses item by its type)."""
    kind = message.get("type") if isinstance(message, Mapping) else None
    return Marker(str(kind) if kind not in (None, "message") else "message", _json(message))


def _part_text(part: c.Text | c.Image) -> str:
    if isinstance(part, c.Image):
        return "[image]"
    return f"[refusal] {part.text}" if part.extra.get("type") == "refusal" else part.text


def _joined(parts: Any) -> str:
    texts = [_part_text(p) for p in parts if isinstance(p, c.Text | c.Image)]
    return "\n".join(t for t in texts if t)


def system_entries(dialect: str | None, params: Mapping[str, Any]) -> list[Entry]:
    """The system prompt a request carries outside its messages (Anthropic ``system``,
    Responses ``instructions``)."""
    key = {"messages": "system", "responses": "instructions"}.get(dialect or "")
    value = params.get(key) if key else None
    if not value:
        return []
    texts = read_system(dialect, value)
    if texts is None:
        return [Marker("system", _json(value))]
    text = _joined(texts)
    return [Said("system", text)] if text else []


def message_entries(dialect: str | None, message: Any) -> list[Entry]:
    """The entries of one recorded request message (or Responses input item)."""
    if isinstance(message, Mapping) and message.get("type") not in (None, "message"):
        dialect = "responses"  # an item, whatever the request's dialect
    if dialect == "messages" and isinstance(message, Mapping):
        return _blocks(message)
    return _entries(dialect, message)


def _blocks(message: Mapping[str, Any]) -> list[Entry]:
    """An Anthropic message: each content block read (and shown) on its own."""
    content = message.get("content")
    if not isinstance(content, list):
        return _entries("messages", message)
    out: list[Entry] = []
    for block in content:
        out.extend(_entries("messages", {**message, "content": [block]}, block))
    return out


def _entries(dialect: str | None, message: Any, shown: Any = None) -> list[Entry]:
    """``message`` read in ``dialect``; ``shown`` (default: the message) is what a
    message that does not parse shows."""
    request = read_message(dialect, message)
    if request is None:
        return [_raw(message if shown is None else shown)]
    out: list[Entry] = []
    if request.system:  # a leading system message is read as the request's system prompt
        role = request.system[0].extra.get("role", "system")
        out.append(Said(str(role), _joined(request.system)))
    for msg in request.messages:
        out.extend(_message(dialect, msg))
    return out


def _message(dialect: str | None, msg: c.Message) -> list[Entry]:
    if msg.role == "assistant":
        return _reply(dialect, msg)
    if msg.role == "tool":
        return [_result(p) for p in msg.parts if isinstance(p, c.ToolResult)]
    return [Said(str(msg.extra.get("role", "user")), _joined(msg.parts))]


def _result(part: c.ToolResult) -> ToolResultEntry:
    name = part.extra.get("name")  # chat's tool message may name its tool
    text = _joined(part.content)
    return ToolResultEntry(
        text, part.call_id, name if isinstance(name, str) else None, part.is_error
    )


def _reply(dialect: str | None, msg: c.Message) -> list[Entry]:
    """An assistant turn: its reasoning, then its text, then its tool calls."""
    thoughts: list[Entry] = []
    calls: list[Entry] = []
    for part in msg.parts:
        if isinstance(part, c.Reasoning):
            thoughts.extend(_reasoning(dialect, part))
        elif isinstance(part, c.ToolCall):
            calls.append(ToolCallEntry(part.name, part.arguments, part.id))
    text = _joined(msg.parts)
    refusal = msg.extra.get("refusal")  # chat's assistant refusal
    if isinstance(refusal, str):
        text = (text + "\n" if text else "") + f"[refusal] {refusal}"
    return [*thoughts, *([Said("assistant", text)] if text else []), *calls]


def _reasoning(dialect: str | None, part: c.Reasoning) -> list[Entry]:
    if part.extra.get("type") == "redacted_thinking":
        return [ReasoningEntry("", redacted=True)]
    if dialect == "responses":
        return [ReasoningEntry(part.text, redacted=not part.text and bool(part.signature))]
    if dialect == "messages":
        return [ReasoningEntry(part.text)]
    return [ReasoningEntry(part.text)] if part.text else []


def body_entries(payload: Mapping[str, Any]) -> list[Entry]:
    """The output of a ``model_response`` payload: its ``message`` (a token client's
    answer parsed from the raw completion in ``body``, or a message recorded alone), else
    its ``body`` (in the upstream's dialect, streams folded into body shape; each
    dialect's body has its own top-level key)."""
    message, body = payload.get("message"), payload.get("body")
    if isinstance(message, Mapping):
        return _entries("chat", {**message, "role": "assistant"})
    if not isinstance(body, Mapping):
        return []
    if "choices" in body:
        return _choice(body.get("choices") or [{}])
    if "output" in body:
        out: list[Entry] = []
        for item in body.get("output") or ():
            out.extend(_entries("responses", item) if isinstance(item, Mapping) else [])
        return out
    content = body.get("content")
    if isinstance(content, str):  # llama.cpp /completion (the token client)
        return [Said("assistant", content)]
    if isinstance(content, list):
        return _blocks({"role": "assistant", "content": content})
    return [Said("assistant", "" if content is None else _json(content))]


def _choice(choices: list[Any]) -> list[Entry]:
    """A chat answer's message, or a completions answer's text (the token client)."""
    first = choices[0] if isinstance(choices[0], Mapping) else {}
    message = first.get("message")
    if isinstance(message, Mapping):
        return _entries("chat", {**message, "role": "assistant"})
    text = first.get("text")
    return [Said("assistant", text)] if isinstance(text, str) and text else []
