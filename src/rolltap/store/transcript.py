"""A readable, one-line-per-event rendering of a session's history.

>>> from rolltap.store.events import Event
>>> describe(Event(0, "model_error", 0.0, {"code": "upstream_timeout", "status": 504,
...     "message": "no answer"}))
'✗ 504 upstream_timeout: no answer'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from rolltap.store.events import Event

__all__ = ["describe", "text_of"]

_WIDTH = 240


def _clip(text: str, width: int = _WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of parts (OpenAI, Anthropic)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [text_of(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content]
        return " ".join(p for p in parts if p)
    return "" if content is None else orjson.dumps(content).decode()


def _request(p: Mapping[str, Any]) -> str:
    messages = p.get("messages") or []
    said = " | ".join(f"{m.get('role', '?')}: {text_of(m.get('content'))}" for m in messages)
    stream = " stream" if p.get("stream") else ""
    return f"→ {p.get('dialect', '')}{stream} +{len(messages)} msg: {said}"


def _response(p: Mapping[str, Any]) -> str:
    message = p.get("message")
    if message is None and isinstance(p.get("body"), dict):
        choices = p["body"].get("choices") or [{}]
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
    text = text_of(message.get("content")) if isinstance(message, dict) else ""
    usage = p.get("usage") or {}
    tokens = usage.get("completion_tokens", usage.get("output_tokens"))
    extra = f" [{p.get('finish_reason')}, {tokens} tok]" if tokens is not None else ""
    return f"← {p.get('status', '')}{extra}: {text}"


_BY_KIND: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "model_request": _request,
    "model_response": _response,
    "model_error": lambda p: f"✗ {p.get('status', '')} {p.get('code', '')}: {p.get('message', '')}",
    "harness_output": lambda p: f"{p.get('stream', 'output')}> {p.get('text', '')}",
    "reward": lambda p: f"reward {p.get('reward')}",
    "status": lambda p: f"status {p.get('status')} {p.get('reason') or ''}",
    "note": lambda p: f"note {p.get('text', '')}",
}


def describe(event: Event, width: int = _WIDTH) -> str:
    """One line saying what ``event`` records (unknown kinds: their JSON payload)."""
    render = _BY_KIND.get(event.kind)
    if render is None:
        return _clip(f"{event.kind} {orjson.dumps(dict(event.payload)).decode()}", width)
    try:
        return _clip(render(event.payload), width)
    except (AttributeError, TypeError, KeyError, IndexError):  # a payload off its schema
        return _clip(f"{event.kind} {orjson.dumps(dict(event.payload)).decode()}", width)
