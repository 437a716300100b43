"""The OpenAI chat-completions wire format: request validation, rewrites, error bodies.

Validation is hand-written rather than a pydantic model because it runs on every call
on the gateway's hot path: it checks the fields the gateway relies on and names the
first offending field, and leaves unknown fields alone (they are relayed as sent).
"""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.errors import InvalidRequestError, RolltapError
from rolltap.http.json_body import load_json_object

__all__ = [
    "ROLES",
    "check_request",
    "error_body",
    "parse_request",
    "split_params",
]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

_NUMBER_FIELDS = ("temperature", "top_p", "frequency_penalty", "presence_penalty")
_INT_FIELDS = ("max_tokens", "max_completion_tokens", "n", "seed", "top_logprobs")


def parse_request(raw: bytes) -> dict[str, Any]:
    """Parse and validate a chat-completions request body.

    >>> parse_request(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')["model"]
    'm'
    """
    return check_request(load_json_object(raw))


def check_request(body: dict[str, Any], start: int = 0) -> dict[str, Any]:
    """:func:`parse_request`'s checks on a parsed ``body``; its first ``start`` messages
    were checked before and are skipped."""
    _check_messages(body.get("messages"), start)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidRequestError("must be a string", field="model")
    _check_types(body)
    _check_tools(body.get("tools"))
    return body


def _check_messages(messages: object, start: int) -> None:
    if not isinstance(messages, list) or not messages:
        raise InvalidRequestError("must be a non-empty array of messages", field="messages")
    for i in range(start, len(messages)):
        msg = messages[i]
        if not isinstance(msg, dict):
            raise InvalidRequestError("must be an object", field=f"messages[{i}]")
        role = msg.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidRequestError(
                f"must be one of {sorted(ROLES)}, got {role!r}", field=f"messages[{i}].role"
            )
        content = msg.get("content")
        if content is not None and not isinstance(content, str | list):
            raise InvalidRequestError(
                "must be a string, an array of parts or null", field=f"messages[{i}].content"
            )
        if role == "tool" and not isinstance(msg.get("tool_call_id"), str):
            raise InvalidRequestError("is required", field=f"messages[{i}].tool_call_id")


def _check_types(body: dict[str, Any]) -> None:
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequestError("must be a boolean", field="stream")
    opts = body.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        raise InvalidRequestError("must be an object", field="stream_options")
    for name in _NUMBER_FIELDS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidRequestError("must be a number", field=name)
    for name in _INT_FIELDS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidRequestError("must be an integer", field=name)
        if isinstance(value, int) and value < 0:
            raise InvalidRequestError("must be >= 0", field=name)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str | list):
        raise InvalidRequestError("must be a string or an array of strings", field="stop")


def _check_tools(tools: object) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequestError("must be an array", field="tools")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequestError("must be an object", field=f"tools[{i}]")
        fn = tool.get("function")
        if tool.get("type", "function") == "function" and (
            not isinstance(fn, dict) or not isinstance(fn.get("name"), str)
        ):
            raise InvalidRequestError("must name a function", field=f"tools[{i}].function.name")


def split_params(body: dict[str, Any]) -> dict[str, Any]:
    """Everything in a request except its messages (what a request event keeps as params)."""
    return {k: v for k, v in body.items() if k != "messages"}


def error_body(err: RolltapError) -> bytes:
    """An OpenAI-shaped error body carrying rolltap's stable code.

    >>> from rolltap.errors import AuthenticationError
    >>> orjson.loads(error_body(AuthenticationError("bad key")))["error"]["code"]
    'invalid_api_key'
    """
    error: dict[str, Any] = {"message": err.message, "type": err.type, "code": err.code}
    field = getattr(err, "field", None)
    if field is not None:
        error["param"] = field
    upstream = getattr(err, "upstream_error", None)
    if upstream is not None:
        error["upstream"] = upstream
    return orjson.dumps({"error": error})
