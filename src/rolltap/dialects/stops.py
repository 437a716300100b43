"""Stop reasons: each dialect's names for the canonical ones, in one place.

Body parsers and stream parsers read with the ``*_IN`` tables, body and stream
renderers write with the ``*_OUT`` ones, so a stream and a body of the same answer
always name its stop the same way. (Responses has no stop field: it says ``status``
and ``incomplete_details``, handled where it is parsed.)

>>> CHAT_OUT["tool_use"], MESSAGES_IN["refusal"]
('tool_calls', 'content_filter')
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from rolltap.dialects.canonical import StopReason

__all__ = ["CHAT_IN", "CHAT_OUT", "MESSAGES_IN", "MESSAGES_OUT", "json_names"]

CHAT_IN: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",  # the legacy spelling of a tool call
    "content_filter": "content_filter",
}
CHAT_OUT: Mapping[StopReason, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}
#: others (``pause_turn`` …) have no canonical reason
MESSAGES_IN: Mapping[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "refusal": "content_filter",
}
MESSAGES_OUT: Mapping[StopReason, str] = {v: k for k, v in MESSAGES_IN.items()}


def json_names(table: Mapping[StopReason, str], default: str) -> dict[StopReason | None, bytes]:
    """``table`` as JSON strings for renderers that splice bytes; None → ``default``."""
    out: dict[StopReason | None, bytes] = {k: orjson.dumps(v) for k, v in table.items()}
    out[None] = orjson.dumps(default)
    return out
