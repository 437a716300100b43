"""The shape almost every chat request has, recognised without building anything.

Validating a request by parsing it into the canonical model (:mod:`.parse`) builds a
message object, its parts and a residual dict per message, then the tools, then throws
them all away: ~270 Python calls for a turn of two messages, the largest part of the
gateway's own time per pass-through call (issue 17). :func:`plainly_valid` walks the same
values with ``isinstance`` and ``dict.get`` only and answers True when the parse could
raise nothing; otherwise the parse runs and names the error, so every error a harness
sees, and its ``param``, still comes from one place.

Sound, not complete: it answers False for shapes it does not know (image parts, tool
calls of another type, a ``tool_choice`` object), which then take the parse. The
property test in ``tests/dialects/test_chat_plain.py`` checks that True never lets
through a body the parse refuses.
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import optional, plain_function, plain_list

__all__ = ["plainly_valid"]


def plainly_valid(body: dict[str, Any], start: int) -> bool:
    """True when :func:`~rolltap.dialects.chat.parse.parse_request_body` (tolerant, from
    message ``start``) certainly accepts ``body``, which has passed
    :func:`~rolltap.dialects.chat.check.check_request` (so its messages are objects with
    known roles, its numbers numbers and its tools objects)."""
    messages: list[Any] = body["messages"]
    for i in range(start, len(messages)):
        if not _plain_message(messages[i]):
            return False
    return _plain_params(body) and plain_list(body.get("tools"), _plain_tool)


def _plain_message(msg: dict[str, Any]) -> bool:
    if not _plain_content(msg.get("content")):
        return False
    if msg.get("role") != "assistant":
        return True
    return plain_list(msg.get("tool_calls"), _plain_call)


def _plain_call(call: dict[str, Any]) -> bool:
    fn = call.get("function")
    return (
        call.get("type", "function") == "function"
        and type(fn) is dict
        and type(call.get("id")) is str
        and type(fn.get("name")) is str
        and type(fn.get("arguments")) is str
    )


def _plain_content(content: object) -> bool:
    if content is None or type(content) is str:
        return True
    if type(content) is not list:
        return False
    for part in content:
        if type(part) is not dict or part.get("type") != "text":
            return False
        if type(part.get("text")) is not str:
            return False
    return True


def _plain_params(body: dict[str, Any]) -> bool:
    top_k, stop = body.get("top_k"), body.get("stop")
    if not optional(top_k, int):
        return False
    if (
        stop is not None
        and type(stop) is not str
        and (type(stop) is not list or any(type(s) is not str for s in stop))
    ):
        return False
    for name in ("user", "model"):
        value = body.get(name)
        if not optional(value, str):
            return False
    parallel = body.get("parallel_tool_calls")
    if not optional(parallel, bool):
        return False
    return type(body.get("tool_choice")) is not dict


def _plain_tool(tool: dict[str, Any]) -> bool:
    if tool.get("type", "function") != "function":
        return True  # kept whole as an extra: nothing in it is read
    fn = tool.get("function")
    return type(fn) is dict and plain_function(fn)
