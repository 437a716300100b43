"""The shape almost every Responses request has, recognised without building anything.

Validating a request by parsing it into the canonical model (:mod:`.parse`)
builds a message or part object and a residual dict per input item, then the tools,
then throws them all away. :func:`plainly_valid` walks the same values with type checks
and ``dict.get`` only and answers True when the parse could raise nothing; otherwise the
parse runs and names the error, so every error a harness sees, and its ``param``, still
comes from one place (as :mod:`rolltap.dialects.chat.plain` does for chat).

Sound, not complete: it answers False for shapes it does not know (image, file and
refusal parts, hosted tool-call items, item references, a ``tool_choice`` that is not a
string or an object), which then take the parse. The tests in
``tests/dialects/test_responses_plain.py`` check that True never lets through a body
the parse refuses.
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import optional, plain_function, plain_list

__all__ = ["plainly_valid"]

# Tuples, not sets: ``in`` on a tuple compares, so an unhashable value is just not found.
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")


def plainly_valid(body: dict[str, Any], start: int) -> bool:
    """True when :func:`~rolltap.dialects.responses.parse.parse_request_body` (tolerant,
    from input item ``start``) certainly accepts ``body``."""
    items = body.get("input")
    if type(items) is list:
        for i in range(start, len(items)):  # the parse's own range, negative start too
            if not _plain_item(items[i]):
                return False
    elif not optional(items, str):
        return False
    return _plain_params(body) and plain_list(body.get("tools"), _plain_tool)


def _plain_item(item: object) -> bool:
    if type(item) is not dict:
        return False
    kind = item.get("type", "message")  # as the parse reads it: a present None is no type
    if kind == "function_call":
        return (
            type(item.get("call_id")) is str
            and type(item.get("name")) is str
            and type(item.get("arguments")) is str
        )
    if kind == "function_call_output":
        return type(item.get("call_id")) is str and _plain_content(item.get("output"))
    if kind == "message":
        return item.get("role") in _ROLES and _plain_content(item.get("content"))
    if kind == "reasoning":
        return _plain_reasoning(item)
    return False  # other items (hosted tool calls, references) and a type that is no string


def _plain_content(content: object) -> bool:
    """A string, or text parts only (so no part becomes an image a role refuses)."""
    if type(content) is str:
        return True
    if type(content) is not list:
        return False
    for part in content:
        if type(part) is not dict or part.get("type") not in _TEXT_PARTS:
            return False
        if type(part.get("text")) is not str:
            return False
    return True


def _plain_reasoning(item: dict[str, Any]) -> bool:
    signature = item.get("encrypted_content")
    if not optional(signature, str):
        return False
    summary = item.get("summary")
    if not optional(summary, list):
        return False
    if summary:
        return _plain_texts(summary)
    content = item.get("content")  # read only when there is no summary text
    return content is None or (type(content) is list and _plain_texts(content))


def _plain_texts(entries: list[Any]) -> bool:
    for entry in entries:
        if type(entry) is not dict or type(entry.get("text")) is not str:
            return False
    return True


def _plain_params(body: dict[str, Any]) -> bool:
    for name in ("instructions", "model", "user"):
        value = body.get(name)
        if not optional(value, str):
            return False
    for name in ("stream", "parallel_tool_calls"):
        value = body.get(name)
        if not optional(value, bool):
            return False
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if not optional(value, float, int):
            return False
    limit = body.get("max_output_tokens")
    if not optional(limit, int):
        return False
    return _plain_tool_choice(body.get("tool_choice"))


def _plain_tool_choice(choice: object) -> bool:
    if choice is None or type(choice) is str:
        return True  # a string that is no mode is kept as an extra: nothing is read
    if type(choice) is not dict:
        return False
    # Only a function choice has its name read; other objects are kept whole.
    return choice.get("type") != "function" or type(choice.get("name")) is str


def _plain_tool(tool: dict[str, Any]) -> bool:
    if tool.get("type") != "function":
        return True  # hosted tools are kept whole as an extra: nothing in them is read
    return plain_function(tool)
