"""The canonical model of a model call that every dialect parses into and renders from.

Three wire formats reach the gateway (OpenAI chat completions, Anthropic Messages,
OpenAI Responses) and three leave it. Rather than n² pairwise translators, each
dialect module converts to and from these types; a translation is
``render_X(parse_Y(body))``. The types are immutable, carry only what has meaning
in more than one dialect, and keep what does not in ``extra``; a renderer for
another dialect decides each such field by the translation table
(:mod:`rolltap.dialects.allowlist`): expressed, or dropped and recorded, or refused
with a 400 that names it; nothing is dropped silently.

Streams use the same idea: a dialect's stream parser turns upstream events into
:data:`StreamEvent` values, and a dialect's stream renderer turns those into the
harness's events, incrementally (one upstream chunk in, zero or more bytes out).

Nested extras: every message, part and tool has an ``extra`` too (that object's
native fields with no canonical meaning; left out of hashing), and a request or
response names in ``origin`` the dialect (``"chat"``, ``"messages"``, ``"responses"``)
whose field names key all of its extras and whose opaque values (reasoning
signatures) it carries. Parsers set ``origin`` only when there is such a thing to
carry, so a plain conversation compares equal whichever dialect it came from.

>>> req = Request(messages=(Message("user", (Text("hi"),)),), max_tokens=16)
>>> req.messages[0].parts[0]
Text(text='hi', extra={})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    # only named in annotations: the canonical model loads nothing but itself
    from rolltap.errors import RolltapError

__all__ = [
    "STOP_REASONS",
    "BlockDelta",
    "BlockKind",
    "BlockStart",
    "BlockStop",
    "Dialect",
    "DialectName",
    "Image",
    "Message",
    "Part",
    "Reasoning",
    "Request",
    "Response",
    "Role",
    "StopReason",
    "StreamEnd",
    "StreamEvent",
    "StreamStart",
    "Text",
    "Tool",
    "ToolCall",
    "ToolChoice",
    "ToolResult",
    "Usage",
]

Role = Literal["user", "assistant", "tool"]
"""``tool`` messages hold :class:`ToolResult` parts only (chat's ``role: tool``)."""

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "content_filter"]
STOP_REASONS: tuple[StopReason, ...] = (
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "content_filter",
)


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class Image:
    """An image by URL (``source="url"``) or inline (``source="base64"`` with ``media_type``)."""

    source: Literal["url", "base64"]
    data: str
    media_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the assistant made. ``arguments`` is the JSON text exactly as produced."""

    id: str
    name: str
    arguments: str
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of ``call_id``, sent back by the harness."""

    call_id: str
    content: tuple[Text | Image, ...]
    is_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Model reasoning (Anthropic ``thinking``, chat ``reasoning_content``, Responses
    ``reasoning``). ``signature`` is opaque and round-trips only to its own dialect."""

    text: str
    signature: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


Part = Text | Image | ToolCall | ToolResult | Reasoning


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...]
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``mode="tool"`` forces the tool ``name``; ``parallel=False`` asks for one call at most."""

    mode: Literal["auto", "none", "required", "tool"] = "auto"
    name: str | None = None
    parallel: bool | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """A model call: conversation, tools and sampling settings.

    ``extra`` holds top-level fields of the source dialect with no canonical meaning,
    keyed by their name there; a renderer for the same dialect writes them back, a
    renderer for another dialect decides each by the translation table. ``origin`` is
    the dialect ``extra`` (and the nested extras) came from; None when there are none.
    """

    messages: tuple[Message, ...]
    model: str | None = None
    system: tuple[Text, ...] = ()
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    stream: bool = False
    user: str | None = None
    #: how hard the model should reason, in OpenAI's words (``none``, ``minimal``,
    #: ``low``, ``medium``, ``high``, ``xhigh``): chat's ``reasoning_effort``, Responses'
    #: ``reasoning.effort``, Messages' ``output_config.effort`` or thinking budget
    reasoning_effort: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A complete (non-streamed, or streamed and folded) model answer.

    ``extra`` keeps what the upstream sent beyond the canonical fields and the
    recorder must not lose: token ids, logprobs, the upstream's own ids. Its shape
    mirrors the ``origin`` dialect's body (e.g. chat keeps ``choices[0].logprobs`` at
    ``extra["choices"][0]["logprobs"]``), so rendering to that dialect restores it.
    """

    id: str
    model: str
    parts: tuple[Text | ToolCall | Reasoning, ...]
    stop_reason: StopReason | None
    usage: Usage
    stop_sequence: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    origin: str | None = None


# --- streams -------------------------------------------------------------------------

BlockKind = Literal["text", "tool_call", "reasoning"]


@dataclass(frozen=True, slots=True)
class StreamStart:
    id: str
    model: str
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class BlockStart:
    """A content block opens. Indexes count from 0 in order of appearance and are
    never reused in one stream; blocks may interleave (parallel tool calls)."""

    index: int
    kind: BlockKind
    id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class BlockDelta:
    """Text for text and reasoning blocks; an argument JSON fragment for tool calls."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class BlockStop:
    """A block closes; a reasoning block may carry its opaque ``signature`` here."""

    index: int
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class StreamEnd:
    stop_reason: StopReason | None
    usage: Usage
    stop_sequence: str | None = None


StreamEvent = StreamStart | BlockStart | BlockDelta | BlockStop | StreamEnd


# The seam every dialect folder implements (its ``__init__`` exposes ``DIALECT``).
DialectName = Literal["chat", "messages", "responses"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """One wire dialect: where its upstream listens and how its bodies translate."""

    name: DialectName
    path: str
    validate_request: Callable[[bytes], dict[str, Any]]
    #: validate a parsed body past its first N conversation items (validated before)
    validate_body: Callable[[dict[str, Any], int], dict[str, Any]]
    to_canonical: Callable[[dict[str, Any]], Request]
    from_canonical: Callable[[Request], dict[str, Any]]
    response_to_canonical: Callable[[dict[str, Any]], Response]
    response_from_canonical: Callable[[Response], dict[str, Any]]
    error_body: Callable[[RolltapError], bytes]
    upstream_error_detail: Callable[[bytes], dict[str, Any] | None]
