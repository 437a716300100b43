"""Anthropic Messages <-> the canonical model (non-streaming), error bodies, token estimates.

Mapping (messages -> canonical):

* ``system`` (string or text blocks) -> ``Request.system``; ``system`` entries inside
  ``messages`` -> user messages with ``extra["role"] = "system"``, in place;
* user content: ``text`` and ``image`` blocks (``base64`` and ``url`` sources); its
  ``tool_result`` blocks become canonical tool messages (the results of consecutive
  user messages one tool turn), the rest a user message;
* assistant content: ``text``, ``thinking`` (text and ``signature``),
  ``redacted_thinking`` (a :class:`Reasoning` with no text, its ``data`` as the
  signature) and ``tool_use`` (``input`` as compact JSON text, so it renders back to
  the same object);
* ``max_tokens``, ``stop_sequences``, ``temperature``/``top_p``/``top_k``,
  ``metadata.user_id`` -> ``user``, ``output_config.effort`` or the ``thinking``
  budget -> ``reasoning_effort``, ``tools``/``tool_choice`` (``any`` is canonical
  ``required``; ``disable_parallel_tool_use`` is the negation of ``parallel``).

Rendering: ``max_tokens`` is required by Anthropic, so a request without one is
rendered with :data:`DEFAULT_MAX_TOKENS` (4096) and nothing else is invented. Tool
arguments that are not a JSON object are a 400 naming them (Anthropic's ``input``
must be an object; blank arguments are ``{}``). A tool without parameters gets the
empty object schema. Messages has no ``seed`` (the translation table's policy: refused
by :func:`from_canonical`). Another dialect's system or developer text mid-conversation
renders as a ``system`` entry in place; before any turn (a translation's) it joins
``system``. Reasoning without a signature of this dialect (e.g. chat's
``reasoning_content``) is rendered as ``thinking`` with ``"signature": ""`` (the field
is required; parsing reads ``""`` back as no signature); Anthropic itself rejects
such blocks, other Anthropic-compatible servers take them. See
:mod:`rolltap.dialects.allowlist` for what may be dropped.

Responses: a block with no canonical form (server tool use and its results) makes
:func:`response_to_canonical` raise :class:`~rolltap.errors.UpstreamProtocolError`,
and so do tool-call arguments that are not a JSON object in
:func:`response_from_canonical` (a chat upstream's malformed call has no Anthropic
form). Usage counts cache reads and writes into canonical ``input_tokens``.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from rolltap.dialects._shared import dumps_json, past
from rolltap.dialects.canonical import Image, Part, Request, Response, ToolCall, ToolResult
from rolltap.dialects.messages.parse import parse_request_body
from rolltap.dialects.messages.plain import plainly_valid
from rolltap.dialects.messages.render import DEFAULT_MAX_TOKENS, render_request
from rolltap.dialects.messages.response import parse_response_body, render_response_body
from rolltap.errors import InvalidRequestError, RolltapError, http_status_of
from rolltap.http.json_body import check_depth, parse_json_object

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_TOKENS",
    "TOKENS_PER_IMAGE",
    "TOKENS_PER_MESSAGE",
    "error_body",
    "error_type",
    "estimate_tokens",
    "from_canonical",
    "response_from_canonical",
    "response_to_canonical",
    "to_canonical",
    "upstream_error_detail",
    "validate_body",
    "validate_request",
]

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
"""Role markers and separators around each message."""
TOKENS_PER_IMAGE = 1600
"""What Anthropic charges for a full-size (about 1.15 megapixel) image: an upper bound."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def validate_request(raw: bytes) -> dict[str, Any]:
    """Parse and validate a Messages request body; a 400 names the first bad field.

    >>> validate_request(b'{"model": "m", "messages": []}')
    Traceback (most recent call last):
    ...
    rolltap.errors.InvalidRequestError: max_tokens: is required and must be an integer
    """
    return validate_body(parse_json_object(raw))


def validate_body(body: dict[str, Any], start: int = 0) -> dict[str, Any]:
    """:func:`validate_request` on a parsed body whose first ``start`` messages were
    validated before (a prefix the rollout already sent): they are not walked again."""
    check_depth(past(body, "messages", start))
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InvalidRequestError("is required and must be an integer", field="max_tokens")
    if max_tokens < 1:
        raise InvalidRequestError("must be >= 1", field="max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequestError("must be a non-empty array of messages", field="messages")
    if not plainly_valid(body, start):  # the parse names what is wrong, if anything
        parse_request_body(body, tolerant=True, start=start)
    return body


def to_canonical(body: dict[str, Any]) -> Request:
    """The canonical form of a Messages request body.

    >>> to_canonical({"max_tokens": 5, "system": "be brief",
    ...               "messages": [{"role": "user", "content": "hi"}]}).system
    (Text(text='be brief', extra={}),)
    """
    return parse_request_body(body)


def from_canonical(req: Request) -> dict[str, Any]:
    """The Messages request body for ``req``; a 400 names what Messages cannot express.

    >>> from rolltap.dialects.canonical import Message, Text
    >>> from_canonical(Request(messages=(Message("user", (Text("hi"),)),)))["max_tokens"]
    4096
    """
    return render_request(req)


def response_to_canonical(body: dict[str, Any]) -> Response:
    """The canonical form of a Messages response (cache reads and writes counted in
    ``usage.input_tokens``).

    >>> body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    ...         "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
    ...         "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}
    >>> response_to_canonical(body).usage.input_tokens
    3
    """
    return parse_response_body(body)


def response_from_canonical(resp: Response) -> dict[str, Any]:
    """The Messages response body for ``resp``.

    >>> from rolltap.dialects.canonical import Text, Usage
    >>> response_from_canonical(Response("m1", "m", (Text("hi"),), "content_filter", Usage()))[
    ...     "stop_reason"]
    'refusal'
    """
    return render_response_body(resp)


def error_type(status: int) -> str:
    """The standard Anthropic error type for an HTTP status (other 4xx are
    ``invalid_request_error``, as Anthropic's docs say; other 5xx ``api_error``).

    >>> error_type(529), error_type(409), error_type(502)
    ('overloaded_error', 'invalid_request_error', 'api_error')
    """
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def error_body(err: RolltapError) -> bytes:
    """An Anthropic-shaped error body carrying rolltap's stable code. The type follows
    the HTTP status the gateway answers with (an upstream's own, for upstream errors).

    >>> from rolltap.errors import ModelPoolFullError
    >>> orjson.loads(error_body(ModelPoolFullError("full")))["error"]["type"]
    'rate_limit_error'
    """
    error: dict[str, Any] = {
        "type": error_type(http_status_of(err)),
        "message": err.message,
        "code": err.code,
    }
    field = getattr(err, "field", None)
    if field is not None:
        error["param"] = field
    upstream = getattr(err, "upstream_error", None)
    if upstream is not None:
        error["upstream"] = upstream
    return orjson.dumps({"type": "error", "error": error})


def upstream_error_detail(raw: bytes) -> dict[str, Any] | None:
    """The upstream's own error object from a Messages error body.

    >>> upstream_error_detail(b'{"type": "error", "error": {"type": "overloaded_error",'
    ...                       b' "message": "Overloaded"}}')["type"]
    'overloaded_error'
    """
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    detail = parsed.get("error") if isinstance(parsed, dict) else None
    return detail if isinstance(detail, dict) else None


def estimate_tokens(req: Request) -> int:
    """A rough input-token count for when the upstream cannot count (count_tokens):
    ``ceil(chars / 4)`` over every text, reasoning, tool name, argument and schema
    (as compact JSON), plus :data:`TOKENS_PER_MESSAGE` per message and
    :data:`TOKENS_PER_IMAGE` per image.

    >>> from rolltap.dialects.canonical import Message, Text
    >>> estimate_tokens(Request(messages=(Message("user", (Text("12345678"),)),)))
    6
    """
    chars = sum(len(t.text) for t in req.system)
    images = 0
    for tool in req.tools:
        chars += len(tool.name) + len(tool.description or "") + len(dumps_json(tool.parameters))
    for msg in req.messages:
        for part in msg.parts:
            part_chars, part_images = _size(part)
            chars += part_chars
            images += part_images
    count = math.ceil(chars / CHARS_PER_TOKEN)
    return count + TOKENS_PER_MESSAGE * len(req.messages) + TOKENS_PER_IMAGE * images


def _size(part: Part) -> tuple[int, int]:
    """(characters, images) of one part."""
    if isinstance(part, Image):
        return 0, 1
    if isinstance(part, ToolCall):
        return len(part.name) + len(part.arguments), 0
    if isinstance(part, ToolResult):
        sizes = [_size(c) for c in part.content]
        return sum(s[0] for s in sizes), sum(s[1] for s in sizes)
    return len(part.text), 0
