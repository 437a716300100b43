"""Fields of one dialect that a renderer for another dialect may drop instead of refusing.

Everything a parser cannot map lands in an ``extra``; rendering it to another dialect
is a 400 naming the field, except for the fields below, which change nothing the
model sees (transport, storage and caching hints, bookkeeping ids, a second spelling
of a mapped value) or are mapped onto a canonical field already. Any field whose
value is null is also dropped (null means "not set" in all three APIs).

========== ======== ===================================================================
dialect    level    field (dropped when)
========== ======== ===================================================================
chat       request  ``n`` (== 1), ``stream_options``, ``max_completion_tokens`` /
                    ``max_tokens`` (spellings of canonical ``max_tokens``),
                    ``response_format`` (== the default ``{"type": "text"}``)
chat       message  ``tool_calls`` and ``annotations`` (when empty, as SDKs echo them)
chat       part     ``index`` (on an echoed tool call), ``fields`` (reasoning spelling)
messages   request  ``metadata`` (its ``user_id`` is mapped to ``user``)
messages   nested   ``cache_control`` on messages, parts and tools (a caching hint)
messages   part     ``type`` == ``redacted_thinking`` (the block is left out: opaque
                    outside Anthropic, like a signature)
messages   tool     ``type`` == ``custom`` (the default)
responses  request  ``store``, ``include``, ``prompt_cache_key``; at their defaults:
                    ``text`` (plain text format, medium verbosity), ``truncation``
                    (``disabled``), ``background`` (false)
responses  nested   ``id``, ``status``, ``item`` on messages and parts (an echoed output
                    item's id and status)
responses  part     ``summary``, ``content`` (reasoning text, mapped), ``annotations``
                    and ``logprobs`` (when empty), ``type`` (``input_text``,
                    ``output_text`` or ``refusal``: a text's spelling)
========== ======== ===================================================================

Also dropped where the target has no field for them, by design: a reasoning
``signature`` outside its own dialect (see
:class:`~rolltap.dialects.canonical.Reasoning`), a tool result's ``is_error`` when
rendering to chat or Responses (neither has the flag; the result text still says it),
and, rendering to Messages, an image's ``detail`` (a resolution hint) and a system
text's ``developer`` role (Anthropic's system prompt plays both parts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["Allow", "Level", "droppable"]

Level = Literal["request", "message", "part", "tool"]
Allow = Mapping[str, Callable[[Any], bool]]
"""Foreign extras that may be dropped: field name -> is this value safe to drop."""


def always(_: object) -> bool:
    return True


def is_empty(value: object) -> bool:
    return not value


def _is_one(value: object) -> bool:
    return value == 1


def _plain_format(value: object) -> bool:
    return value == {"type": "text"}


def _default_text(value: object) -> bool:
    """Responses' ``text`` setting at its default: plain text, medium verbosity."""
    if not isinstance(value, dict) or set(value) - {"format", "verbosity"}:
        return False
    return value.get("format", {"type": "text"}) == {"type": "text"} and value.get(
        "verbosity", "medium"
    ) in ("medium", None)


def _custom(value: object) -> bool:
    return value == "custom"


def _text_type(value: object) -> bool:
    return value in ("input_text", "output_text", "refusal")


def _redacted(value: object) -> bool:
    return value == "redacted_thinking"


_CACHE: Allow = {"cache_control": always}
_ITEM: Allow = {"id": always, "status": always, "item": always}

_TABLE: dict[str, dict[Level, Allow]] = {
    "chat": {
        "request": {
            "n": _is_one,
            "stream_options": always,
            "max_completion_tokens": always,
            "max_tokens": always,
            "response_format": _plain_format,
        },
        "message": {"tool_calls": is_empty, "annotations": is_empty},
        "part": {"index": always, "fields": always},
    },
    "messages": {
        "request": {"metadata": always},
        "message": _CACHE,
        "part": {**_CACHE, "type": _redacted},
        "tool": {**_CACHE, "type": _custom},
    },
    "responses": {
        "request": {
            "store": always,
            "include": always,
            "prompt_cache_key": always,
            "text": _default_text,
            "truncation": lambda v: v == "disabled",
            "background": lambda v: v is False,
        },
        "message": _ITEM,
        "part": {
            **_ITEM,
            "summary": always,
            "content": always,
            "annotations": is_empty,
            "logprobs": is_empty,
            "type": _text_type,
        },
        "tool": {},
    },
}

_NONE: Allow = MappingProxyType({})


def droppable(origin: str | None, level: Level) -> Allow:
    """The fields of ``origin``'s dialect at ``level`` that another dialect may drop.

    >>> droppable("chat", "request")["n"](1)
    True
    """
    if origin is None:
        return _NONE
    return _TABLE.get(origin, {}).get(level, _NONE)
