"""Hypothesis strategies for canonical responses a dialect can express (see
:mod:`dialectkit` for :class:`Caps`)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dialects.dialectkit import Caps, ids, names, reasonings, texts, tool_calls
from rolltap.dialects.canonical import STOP_REASONS, Part, Response, Text, ToolCall, Usage


def usages(caps: Caps) -> st.SearchStrategy[Usage]:
    counts = st.integers(0, 100_000)
    maybe = st.none() | counts if caps.unknown_usage else counts

    def build(i: int, o: int, c: int | None, r: int | None) -> Usage:
        return Usage(i + (c or 0), o, c, r if caps.reasoning_tokens else None)

    return st.builds(build, counts, counts, maybe, maybe)


def response_parts(caps: Caps, signed: bool = False) -> st.SearchStrategy[tuple[Part, ...]]:
    if caps.free_order:
        part = texts.map(Text) | tool_calls(caps) | reasonings(signed)
        return st.lists(part, max_size=4).map(tuple)
    return st.builds(
        lambda r, t, c: (*r, *(Text(x) for x in t), *c),
        st.lists(reasonings(False), max_size=1),
        st.lists(texts, max_size=1),
        st.lists(tool_calls(caps), max_size=2),
    )


def _stop(caps: Caps, parts: tuple[Part, ...], reason: Any, seq: str) -> tuple[Any, str | None]:
    if not caps.free_stop and reason in ("end_turn", "tool_use", "stop_sequence"):
        reason = "tool_use" if any(isinstance(p, ToolCall) for p in parts) else "end_turn"
    if reason == "stop_sequence":
        return (reason, seq) if caps.stop_sequence else ("end_turn", None)
    return reason, None


def responses(caps: Caps, signed: bool = False) -> st.SearchStrategy[Response]:
    """Canonical responses in the normal form of every dialect ``caps`` allows."""

    def build(i: str, m: str, p: tuple[Any, ...], r: Any, s: str, u: Usage) -> Response:
        reason, seq = _stop(caps, p, r, s)
        return Response(i, m, p, reason, u, seq)

    reasons = st.none() | st.sampled_from(STOP_REASONS)
    return st.builds(build, ids, names, response_parts(caps, signed), reasons, texts, usages(caps))
