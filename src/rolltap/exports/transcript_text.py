"""The plain-text rendering of a :class:`~rolltap.exports.transcript_model.Transcript`.

One or more lines per entry; the event's seq starts the first line of each event.

>>> from rolltap.exports.transcript_model import CallInfo, CallReply, Said, ToolCallEntry
>>> t = Transcript((CallReply(3, 0), Said("assistant", "Checking.", 3, 0),
...                 ToolCallEntry("get_weather", '{"city": "Paris"}', "c1", 3, 0)),
...                (CallInfo(status=200, finish_reason="tool_calls", total_ms=12.0),))
>>> print("\\n".join(render_lines(t)))
   3   ← 200 tool_calls · 12 ms
       assistant: Checking.
       tool call get_weather({"city": "Paris"}) [c1]
"""

from __future__ import annotations

from rolltap.exports.transcript_model import (
    CallError,
    CallInfo,
    CallReply,
    CallStart,
    Entry,
    Marker,
    ReasoningEntry,
    Said,
    ToolCallEntry,
    ToolResultEntry,
    Transcript,
)

__all__ = ["render_lines"]

_INDENT = "  "


def render_lines(transcript: Transcript, *, max_chars: int = 4000) -> list[str]:
    """The transcript as text lines; each entry's text is cut after ``max_chars``."""
    lines: list[str] = []
    last_seq: int | None = None
    for entry in transcript.entries:
        call = None if entry.call is None else transcript.calls[entry.call]
        head = f"{entry.seq:>4} " if entry.seq != last_seq else " " * 5
        last_seq = entry.seq
        text = _clip(_line(entry, call), max_chars)
        first, *more = text.split("\n")
        indent = " " * 5 + (_INDENT if entry.call is not None else "")
        lines.append(head + (_INDENT if entry.call is not None else "") + first)
        lines.extend(indent + "  " + line for line in more)
    return lines


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _line(entry: Entry, call: CallInfo | None) -> str:
    if isinstance(entry, CallStart):
        return _request(entry, call)
    if isinstance(entry, CallReply):
        return "← " + _outcome(call)
    if isinstance(entry, CallError):
        timing = _ms(call)
        return f"✗ {entry.status or ''} {entry.code}: {entry.message}{timing}"
    if isinstance(entry, Said):
        return f"{entry.role}: {entry.text}"
    if isinstance(entry, ReasoningEntry):
        return "reasoning: " + ("[redacted]" if entry.redacted else entry.text)
    if isinstance(entry, ToolCallEntry):
        ident = f" [{entry.call_id}]" if entry.call_id else ""
        return f"tool call {entry.name}({entry.arguments}){ident}"
    if isinstance(entry, ToolResultEntry):
        ident = f" [{entry.call_id}]" if entry.call_id else ""
        error = " (error)" if entry.is_error else ""
        return f"tool result {entry.name or '?'}{ident}{error}: {entry.text}"
    assert isinstance(entry, Marker)
    if entry.label in ("stdout", "stderr", "result"):
        return f"{entry.label}> {entry.text}"
    return f"{entry.label} {entry.text}"


def _request(entry: CallStart, call: CallInfo | None) -> str:
    if call is None:
        return "→ model call"
    number = (entry.call or 0) + 1
    dialect = call.dialect or "?"
    if call.upstream_dialect and call.upstream_dialect != call.dialect:
        dialect += f"→{call.upstream_dialect}"
    parts = [f"→ call {number}", dialect]
    if call.model:
        parts.append(call.model)
    if call.stream:
        parts.append("stream")
    plural = "" if call.new_messages == 1 else "s"
    after = f" after {call.prefix_messages} earlier" if call.prefix_messages else ""
    parts.append(f"+{call.new_messages} message{plural}{after}")
    return " · ".join(parts)


def _outcome(call: CallInfo | None) -> str:
    if call is None:
        return "answer"
    head = " ".join(str(x) for x in (call.status, call.finish_reason) if x is not None)
    parts = [head or "answer"]
    if call.prompt_tokens is not None or call.completion_tokens is not None:
        parts.append(f"{_n(call.prompt_tokens)} in / {_n(call.completion_tokens)} out tok")
    if call.ttfc_ms is not None and call.stream:
        parts.append(f"first {call.ttfc_ms:.0f} ms")
    return " · ".join(parts) + _ms(call)


def _ms(call: CallInfo | None) -> str:
    if call is None or call.total_ms is None:
        return ""
    return f" · {call.total_ms:.0f} ms"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
