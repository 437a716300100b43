"""OpenAI chat completions <-> the canonical model (non-streaming).

Mapping (chat -> canonical):

* leading ``system``/``developer`` messages -> ``Request.system`` (a ``developer`` text
  keeps ``extra["role"]``); later ones -> user messages with ``extra["role"]``;
* ``user`` content (string or ``text``/``image_url`` parts; ``data:`` URLs become
  inline images, ``detail`` goes to ``Image.extra``);
* ``assistant``: ``reasoning_content`` (or vLLM's ``reasoning``) -> :class:`Reasoning`,
  ``content`` -> :class:`Text`, ``tool_calls`` -> :class:`ToolCall` (arguments text
  kept exactly), in that order;
* consecutive ``tool`` messages -> one canonical tool message of :class:`ToolResult`;
* ``max_completion_tokens``/``max_tokens``, ``stop`` (string or array), ``top_k`` (a
  vLLM/llama.cpp extension), ``tools``/``tool_choice``/``parallel_tool_calls``.

``max_completion_tokens`` is kept as a spelling (``extra``) so a chat renderer writes
the name the request came with. Chat has no field for a tool result's ``is_error``
and one reasoning/content slot per assistant message (text after a tool call moves
before it); see :mod:`rolltap.dialects.allowlist` for what else may be dropped.
Parts, items and roles with no canonical form (audio, files, refusals, ``function``
messages) are 400s from :func:`to_canonical` but pass :func:`validate_request`.
"""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.dialects._shared import past
from rolltap.dialects.canonical import Request, Response
from rolltap.dialects.chat.check import check_request, error_body
from rolltap.dialects.chat.parse import parse_request_body
from rolltap.dialects.chat.plain import plainly_valid
from rolltap.dialects.chat.render import render_request
from rolltap.dialects.chat.response import parse_response_body, render_response_body
from rolltap.http.json_body import check_depth, parse_json_object

__all__ = [
    "error_body",
    "from_canonical",
    "openai_error_detail",
    "response_from_canonical",
    "response_to_canonical",
    "to_canonical",
    "upstream_error_detail",
    "validate_body",
    "validate_request",
]


def validate_request(raw: bytes) -> dict[str, Any]:
    """Parse and validate a chat request body; a 400 names the first bad field.

    >>> validate_request(b'{"messages": [{"role": "user", "content": "hi"}]}')["messages"][0]
    {'role': 'user', 'content': 'hi'}
    """
    return validate_body(parse_json_object(raw))


def validate_body(body: dict[str, Any], start: int = 0) -> dict[str, Any]:
    """:func:`validate_request` on a parsed body whose first ``start`` messages were
    validated before (a prefix the rollout already sent): they are not walked again.

    >>> validate_body({"messages": [{"role": "user", "content": "hi"}, {"role": "x"}]}, 1)
    Traceback (most recent call last):
    ...
    rolltap.errors.InvalidRequestError: messages[1].role: must be one of \
['assistant', 'developer', 'function', 'system', 'tool', 'user'], got 'x'
    """
    check_depth(past(body, "messages", start))
    check_request(body, start)
    if not plainly_valid(body, start):  # the parse names what is wrong, if anything
        parse_request_body(body, tolerant=True, start=start)
    return body


def to_canonical(body: dict[str, Any]) -> Request:
    """The canonical form of a chat request body.

    >>> to_canonical({"messages": [{"role": "system", "content": "be brief"},
    ...                            {"role": "user", "content": "hi"}]}).system
    (Text(text='be brief', extra={}),)
    """
    return parse_request_body(body)


def from_canonical(req: Request) -> dict[str, Any]:
    """The chat request body for ``req``; a 400 names what chat cannot express.

    >>> from rolltap.dialects.canonical import Message, Text
    >>> from_canonical(Request(messages=(Message("user", (Text("hi"),)),), max_tokens=8))
    {'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 8}
    """
    return render_request(req)


def response_to_canonical(body: dict[str, Any]) -> Response:
    """The canonical form of a chat completion (token ids and logprobs in ``extra``).

    >>> body = {"id": "c1", "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
    ...         "message": {"role": "assistant", "content": "hi"}}]}
    >>> response_to_canonical(body).stop_reason
    'end_turn'
    """
    return parse_response_body(body)


def response_from_canonical(resp: Response) -> dict[str, Any]:
    """The chat completion body for ``resp``.

    >>> from rolltap.dialects.canonical import Text, Usage
    >>> body = response_from_canonical(Response("c1", "m", (Text("hi"),), "end_turn", Usage()))
    >>> body["choices"][0]["finish_reason"]
    'stop'
    """
    return render_response_body(resp)


def openai_error_detail(raw: bytes) -> dict[str, Any] | None:
    """The error object of an OpenAI-shaped error body (``{"error": {...}}``, or
    vLLM's older top-level ``{"object": "error", ...}``); None for anything else."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    detail = parsed.get("error")
    if isinstance(detail, dict):
        return detail
    return parsed if parsed.get("object") == "error" else None


def upstream_error_detail(raw: bytes) -> dict[str, Any] | None:
    """The upstream's own error object from a chat error body.

    >>> upstream_error_detail(b'{"error": {"message": "no", "type": "invalid_request_error"}}')
    {'message': 'no', 'type': 'invalid_request_error'}
    """
    return openai_error_detail(raw)
