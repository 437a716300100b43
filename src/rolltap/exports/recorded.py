"""Recorded bodies read by the dialects' own parsers, in a tolerant mode.

The gateway records what harnesses sent and upstreams answered (``docs/events.md``),
and a stored body may be anything: cut short, refused by the gateway (a recorded
request that failed validation), from a dialect this version does not know, or with
fields the strict parse rejects. Reading one never raises: each recorded message (a
chat message, an Anthropic content block, a Responses item) is parsed on its own by
its dialect's parser (:mod:`rolltap.dialects.registry`, into
:mod:`rolltap.dialects.canonical`); one that does not parse reads as ``None``, for
the caller to show raw, and the messages beside it are read as usual.

>>> read_message("chat", {"role": "user", "content": "hi"}).messages[0].parts
(Text(text='hi', extra={}),)
>>> read_message("chat", {"role": "user", "content": [{"type": "text"}]}) is None
True
>>> read_message("gopher", {"role": "user", "content": "hi"}) is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rolltap.dialects.canonical import Request, Text
from rolltap.dialects.registry import DIALECTS
from rolltap.errors import RolltapError

__all__ = ["read_message", "read_system"]

#: a recorded shape the parsers' own checks do not expect (a parser reads a body the
#: gateway validated first; a recorded one may be any JSON)
_OFF_SCHEMA = (RolltapError, AttributeError, TypeError, KeyError, IndexError, ValueError)
#: where each dialect's body holds its conversation
_LIST_KEY = {"chat": "messages", "messages": "messages", "responses": "input"}


def _parse(dialect: str | None, body: dict[str, Any]) -> Request | None:
    # a request recorded without its dialect is chat's (the gateway's first dialect)
    found = DIALECTS.get(dialect or "chat")
    if found is None:
        return None
    try:
        return found.to_canonical(body)
    except _OFF_SCHEMA:
        return None


def read_message(dialect: str | None, message: Any) -> Request | None:
    """``message`` as the one message of a request in ``dialect``; None when it does
    not parse (or ``dialect`` is not one rolltap knows)."""
    if not isinstance(message, Mapping):
        return None
    return _parse(dialect, {_LIST_KEY.get(dialect or "chat", "messages"): [dict(message)]})


def read_system(dialect: str | None, value: Any) -> tuple[Text, ...] | None:
    """The system prompt a request carries outside its messages (Anthropic ``system``,
    Responses ``instructions``) as canonical texts; None when it does not parse."""
    key = {"messages": "system", "responses": "instructions"}.get(dialect or "")
    if key is None:
        return ()
    parsed = _parse(dialect, {_LIST_KEY[str(dialect)]: [], key: value})
    return None if parsed is None else parsed.system
