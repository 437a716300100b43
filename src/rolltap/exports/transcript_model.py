"""The transcript's data types: what a session's events say, in reading order.

A :class:`Transcript` is built from a session's events by
:func:`rolltap.exports.transcript.build_transcript`; ``rolltap sessions show`` renders it
as text (:func:`rolltap.exports.transcript_text.render_lines`) and a viewer may render the
same entries as HTML. Each entry names the event it came from (``seq``) and, when it
belongs to a model call, that call's index in :attr:`Transcript.calls` (``call``).

The conversation itself is read into the one canonical model
(:mod:`rolltap.dialects.canonical`, by :mod:`rolltap.exports.transcript_parts`); an
entry is a canonical part placed in the session (its event and call) and flattened for
reading: a :class:`ToolCallEntry` is a ``canonical.ToolCall`` with its ``seq`` and
``call``, a :class:`Said` the texts of one message joined. :class:`CallStart`,
:class:`CallReply` and :class:`CallError` mark where a call's input, output or failure
begins, and :class:`CallInfo` sums up the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "CallError",
    "CallInfo",
    "CallReply",
    "CallStart",
    "Entry",
    "Marker",
    "ReasoningEntry",
    "Said",
    "ToolCallEntry",
    "ToolResultEntry",
    "Transcript",
]


@dataclass(frozen=True, slots=True)
class Said:
    """A message's text: ``role`` is ``system``, ``developer``, ``user`` or ``assistant``."""

    kind: ClassVar[str] = "said"
    role: str
    text: str
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class ReasoningEntry:
    """Reasoning the model showed (chat ``reasoning_content``, Anthropic thinking,
    Responses reasoning summaries); ``redacted`` when only an opaque form was returned."""

    kind: ClassVar[str] = "reasoning"
    text: str
    redacted: bool = False
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """The model asked for tool ``name`` with ``arguments`` (JSON text, as sent)."""

    kind: ClassVar[str] = "tool_call"
    name: str
    arguments: str
    call_id: str | None = None
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class ToolResultEntry:
    """What the harness answered to tool call ``call_id`` (``name``: that call's tool)."""

    kind: ClassVar[str] = "tool_result"
    text: str
    call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class CallStart:
    """Model call ``call`` starts: what follows up to its :class:`CallReply` is its new input."""

    kind: ClassVar[str] = "request"
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class CallReply:
    """Model call ``call`` answered: what follows is its output."""

    kind: ClassVar[str] = "reply"
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class CallError:
    """Model call ``call`` failed: the harness got HTTP ``status`` with rolltap ``code``."""

    kind: ClassVar[str] = "error"
    code: str
    message: str
    status: int | None = None
    seq: int = -1
    call: int | None = None


@dataclass(frozen=True, slots=True)
class Marker:
    """Any other event: ``label`` is ``stdout``/``stderr``/``result`` (harness output),
    ``reward``, ``status``, ``note``, or an unknown event's kind."""

    kind: ClassVar[str] = "marker"
    label: str
    text: str
    seq: int = -1
    call: int | None = None


Entry = (
    Said
    | ReasoningEntry
    | ToolCallEntry
    | ToolResultEntry
    | CallStart
    | CallReply
    | CallError
    | Marker
)


@dataclass(slots=True)
class CallInfo:
    """One intercepted model call: how it was sent and how it went."""

    intercept_id: str | None = None
    #: the harness's dialect and the upstream's (they differ when the gateway translates)
    dialect: str | None = None
    upstream_dialect: str | None = None
    model: str | None = None
    stream: bool = False
    #: messages recorded on the request (those past the prefix already recorded)
    new_messages: int = 0
    #: how many messages of an earlier request this one repeated unchanged
    prefix_messages: int = 0
    #: the HTTP status the harness received (answer or error); None while unanswered
    status: int | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttfc_ms: float | None = None
    total_ms: float | None = None
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A session's history as entries in event order, with its model calls."""

    entries: tuple[Entry, ...]
    calls: tuple[CallInfo, ...]
