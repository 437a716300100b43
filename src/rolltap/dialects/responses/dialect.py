"""OpenAI Responses <-> the canonical model (non-streaming), and its error bodies.

Mapping (responses -> canonical):

* ``instructions`` and leading ``system``/``developer`` input messages ->
  ``Request.system`` (a developer text keeps ``extra["role"]``); later ones -> user
  messages with ``extra["role"]``; a string ``input`` is one user message;
* user content: ``input_text`` and ``input_image`` (URL or ``data:`` URL; a ``detail``
  other than ``auto`` goes to ``Image.extra``);
* runs of ``reasoning`` (summary text, else ``reasoning_text`` content; the
  ``encrypted_content`` as signature), assistant ``message`` and ``function_call``
  (``call_id``, ``arguments`` kept exactly) items -> one assistant message; runs of
  ``function_call_output`` items -> one tool message;
* ``max_output_tokens``, ``temperature``, ``top_p``, ``user``, ``tools`` (functions are
  strict unless ``strict: false``; canonical ``extra["strict"]`` marks a strict tool),
  ``tool_choice``, ``parallel_tool_calls``.

Responses has no stop sequences, seed or ``top_k``: rendering a request that sets one
is a 400 naming it. Item types with no canonical form (hosted tool calls, item
references, files) are 400s from :func:`to_canonical` but pass
:func:`validate_request`. Output items with no canonical form (hosted tool calls)
make :func:`response_to_canonical` raise
:class:`~rolltap.errors.UpstreamProtocolError`. Output items the renderer writes get
ids derived from the response id (``msg_<id>_<index>``) unless they carry their own.
Error bodies are chat's (``{"error": {...}}``).
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import past
from rolltap.dialects.canonical import Request, Response
from rolltap.dialects.chat.check import error_body
from rolltap.dialects.chat.dialect import openai_error_detail
from rolltap.dialects.responses.parse import parse_request_body
from rolltap.dialects.responses.plain import plainly_valid
from rolltap.dialects.responses.render import render_request
from rolltap.dialects.responses.response import parse_response_body, render_response_body
from rolltap.http.json_body import check_depth, parse_json_object

__all__ = [
    "error_body",
    "from_canonical",
    "response_from_canonical",
    "response_to_canonical",
    "to_canonical",
    "upstream_error_detail",
    "validate_body",
    "validate_request",
]


def validate_request(raw: bytes) -> dict[str, Any]:
    """Parse and validate a Responses request body; a 400 names the first bad field.

    >>> validate_request(b'{"model": "m", "input": "hi"}')["input"]
    'hi'
    """
    return validate_body(parse_json_object(raw))


def validate_body(body: dict[str, Any], start: int = 0) -> dict[str, Any]:
    """:func:`validate_request` on a parsed body whose first ``start`` input items were
    validated before (a prefix the rollout already sent): they are not walked again."""
    check_depth(past(body, "input", start))
    if not plainly_valid(body, start):  # the parse names what is wrong, if anything
        parse_request_body(body, tolerant=True, start=start)
    return body


def to_canonical(body: dict[str, Any]) -> Request:
    """The canonical form of a Responses request body.

    >>> to_canonical({"instructions": "be brief", "input": "hi"}).system
    (Text(text='be brief', extra={}),)
    """
    return parse_request_body(body)


def from_canonical(req: Request) -> dict[str, Any]:
    """The Responses request body for ``req``; a 400 names what Responses cannot express
    (strictly: the translation table's policy fields are refused here; a gateway
    translates with :func:`rolltap.dialects.translate.translate_request`).

    >>> from rolltap.dialects.canonical import Message, Text
    >>> from_canonical(Request(messages=(Message("user", (Text("hi"),)),), stop=("x",)))
    Traceback (most recent call last):
    ...
    rolltap.errors.InvalidRequestError: stop: Responses has no stop sequences
    """
    return render_request(req)


def response_to_canonical(body: dict[str, Any]) -> Response:
    """The canonical form of a Responses response.

    >>> body = {"id": "r1", "model": "m", "status": "incomplete", "output": [],
    ...         "incomplete_details": {"reason": "max_output_tokens"}}
    >>> response_to_canonical(body).stop_reason
    'max_tokens'
    """
    return parse_response_body(body)


def response_from_canonical(resp: Response) -> dict[str, Any]:
    """The Responses response body for ``resp``.

    >>> from rolltap.dialects.canonical import Text, Usage
    >>> response_from_canonical(Response("r1", "m", (Text("hi"),), "end_turn", Usage()))[
    ...     "status"]
    'completed'
    """
    return render_response_body(resp)


def upstream_error_detail(raw: bytes) -> dict[str, Any] | None:
    """The upstream's own error object from a Responses error body.

    >>> upstream_error_detail(b'{"error": {"message": "bad", "code": "x"}}')
    {'message': 'bad', 'code': 'x'}
    """
    return openai_error_detail(raw)
