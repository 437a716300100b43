"""Prompts and completions in the GenAI semantic conventions' message shape.

Only used when content capture is asked for (``--otel-content``): the harness's
request and the upstream's answer are parsed into the canonical model
(:mod:`rolltap.dialects.canonical`), whatever dialect each spoke, and written as the
JSON of ``gen_ai.input.messages``, ``gen_ai.system_instructions`` and
``gen_ai.output.messages`` (role, ``parts`` of type ``text``, ``tool_call``,
``tool_call_response``, ``reasoning``, ``uri``/``blob``; ``finish_reason`` on outputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rolltap.clients.completions import CompletionsFlavor, parse_completion
from rolltap.dialects.canonical import (
    Dialect,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
)
from rolltap.dialects.registry import DIALECTS
from rolltap.dialects.stops import CHAT_OUT
from rolltap.errors import RolltapError

__all__ = ["input_attributes", "output_attributes"]

_COMPLETIONS = "completions."


def _part(part: object) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "content": part.text}
    if isinstance(part, ToolCall):
        return {"type": "tool_call", "id": part.id, "name": part.name,
                "arguments": part.arguments}  # fmt: skip
    if isinstance(part, ToolResult):
        text = "".join(p.text for p in part.content if isinstance(p, Text))
        return {"type": "tool_call_response", "id": part.call_id, "response": text}
    if isinstance(part, Reasoning):
        return {"type": "reasoning", "content": part.text}
    if isinstance(part, Image):
        if part.source == "url":
            return {"type": "uri", "modality": "image", "uri": part.data}
        return {"type": "blob", "modality": "image", "mime_type": part.media_type,
                "content": part.data}  # fmt: skip
    return {"type": type(part).__name__.lower()}


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": [_part(p) for p in message.parts]}


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def input_attributes(harness: Dialect, body: Mapping[str, Any]) -> dict[str, str]:
    """``gen_ai.input.messages`` (and ``gen_ai.system_instructions``) of a harness request."""
    try:
        request = harness.to_canonical(dict(body))
    except RolltapError:
        return {}  # the gateway refused it before any call; nothing well-formed to show
    out = {"gen_ai.input.messages": _json([_message(m) for m in request.messages])}
    if request.system:
        out["gen_ai.system_instructions"] = _json([_part(p) for p in request.system])
    return out


def output_attributes(
    payload: Mapping[str, Any], completions_api: CompletionsFlavor
) -> dict[str, str]:
    """``gen_ai.output.messages`` of a response event (its body in its own dialect)."""
    body, dialect = payload.get("body"), payload.get("dialect")
    if not isinstance(body, dict) or not isinstance(dialect, str):
        return {}
    try:
        if dialect.startswith(_COMPLETIONS):
            completion = parse_completion(completions_api, body)
            text = completion.text
            if text is None:  # a /generate answer: the parsed message has the text
                message = payload.get("message")
                text = message.get("content") if isinstance(message, dict) else None
            parts: list[dict[str, Any]] = [{"type": "text", "content": text or ""}]
            stop = completion.stop_reason
        elif dialect in DIALECTS:
            answer = DIALECTS[dialect].response_to_canonical(body)
            parts, stop = [_part(p) for p in answer.parts], answer.stop_reason
        else:
            return {}
    except RolltapError:
        return {}
    message = {"role": "assistant", "parts": parts,
               "finish_reason": None if stop is None else CHAT_OUT[stop]}  # fmt: skip
    return {"gen_ai.output.messages": _json([message])}
