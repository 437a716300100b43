"""Translating a request body between dialects, saying what was left out.

A harness's body in its own dialect becomes a body in the upstream's: parsed into the
canonical model, rendered back out. What the target cannot express is decided by the
translation table (:mod:`rolltap.dialects.allowlist`, shown in ``docs/translation.md``):
mapped, dropped (always recorded), or left to the endpoint's ``unsupported`` policy —
``"drop"`` (the default: dropped and recorded) or ``"refuse"`` (a 400 naming the field,
its ``param``). Each :class:`Dropped` becomes a ``{"dropped": path, "reason": …}`` entry
of the request event's ``rewrites``.

>>> body = {"model": "m", "input": "hi", "store": False, "reasoning": {"effort": "low"}}
>>> out = translate_request(body, "responses", "chat")
>>> out.body["reasoning_effort"], [d.path for d in out.dropped]
('low', ['store'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from rolltap.dialects._drops import Dropped, Sink, Unsupported, general
from rolltap.dialects.allowlist import ROWS
from rolltap.dialects.canonical import Request
from rolltap.dialects.chat import parse as chat_parse
from rolltap.dialects.chat import render as chat_render
from rolltap.dialects.messages import parse as messages_parse
from rolltap.dialects.messages import render as messages_render
from rolltap.dialects.responses import parse as responses_parse
from rolltap.dialects.responses import render as responses_render
from rolltap.errors import ConfigError

__all__ = [
    "UNSUPPORTED",
    "Dropped",
    "Translation",
    "Unsupported",
    "canonical_request",
    "check_unsupported",
    "dropped_headers",
    "general",
    "translate_request",
]

#: the policies, as ``--unsupported`` and ``unsupported =`` take them
UNSUPPORTED: tuple[Unsupported, ...] = ("drop", "refuse")

_Parse = Callable[..., Request]
_Render = Callable[[Request, Sink], dict[str, Any]]
_PARSE: Mapping[str, _Parse] = MappingProxyType(
    {
        "chat": chat_parse.parse_request_body,
        "messages": messages_parse.parse_request_body,
        "responses": responses_parse.parse_request_body,
    }
)
_RENDER: Mapping[str, _Render] = MappingProxyType(
    {
        "chat": chat_render.render_request,
        "messages": messages_render.render_request,
        "responses": responses_render.render_request,
    }
)


@dataclass(slots=True)
class Translation:
    """A body in the target dialect, and what the translation left out."""

    body: dict[str, Any]
    dropped: list[Dropped]


def check_unsupported(value: str) -> Unsupported:
    """``value`` as a policy; a :class:`~rolltap.errors.ConfigError` for anything else.

    >>> check_unsupported("refuse")
    'refuse'
    """
    for policy in UNSUPPORTED:
        if value == policy:
            return policy
    raise ConfigError(f"unsupported must be 'drop' or 'refuse', got {value!r}")


def translate_request(
    body: dict[str, Any], source: str, target: str, *, unsupported: Unsupported = "drop"
) -> Translation:
    """``body`` (a ``source``-dialect request) in the ``target`` dialect.

    ``source == target`` is no translation: the body itself, nothing dropped. Otherwise
    every field is decided by the table; under ``unsupported="refuse"`` the first field
    the policy covers raises :class:`~rolltap.errors.InvalidRequestError` naming it.
    """
    if source == target:
        return Translation(body, [])
    sink = Sink(check_unsupported(unsupported), target, source)
    request = _PARSE[source](body, tolerant=sink)
    return Translation(_RENDER[target](request, sink), sink.dropped)


def canonical_request(
    body: dict[str, Any], source: str, *, unsupported: Unsupported = "drop"
) -> tuple[Request, list[Dropped]]:
    """``body`` as the canonical request a chat template renders (the token client's):
    what chat cannot express dropped and recorded, or refused, by the same table as a
    translation to chat. A chat body is parsed as it is (its own extras kept, nothing
    dropped); the templates read no extras.
    """
    if source == "chat":
        return chat_parse.parse_request_body(body), []
    chat = translate_request(body, source, "chat", unsupported=unsupported)
    return chat_parse.parse_request_body(chat.body), chat.dropped


def _header_rows(source: str, target: str) -> list[tuple[str, str]]:
    """(name prefix, reason) of the table's header rows for this direction."""
    return [
        (row.field.removesuffix("*"), row.reason)
        for row in ROWS
        if row.level == "header" and row.dialect == source and target in row.targets
    ]


def dropped_headers(names: Iterable[str], source: str, target: str) -> list[Dropped]:
    """The harness's headers that mean nothing to a ``target`` upstream: its own
    vendor's (``anthropic-beta``, ``anthropic-version`` to an OpenAI-dialect upstream),
    each as ``header:<name>`` (the name lowercased; never its value).

    >>> [d.path for d in dropped_headers(["Anthropic-Beta", "x-app"], "messages", "chat")]
    ['header:anthropic-beta']
    """
    if source == target:
        return []
    rows = _header_rows(source, target)
    out: dict[str, Dropped] = {}
    for name in names:
        lower = name.lower()
        reason = next((why for prefix, why in rows if lower.startswith(prefix)), None)
        if reason is not None:
            out.setdefault(lower, Dropped(f"header:{lower}", reason))
    return list(out.values())
