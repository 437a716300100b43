"""The shape almost every Messages request has, recognised without building anything.

Validating a request by parsing it into the canonical model (:mod:`.parse`)
builds a message, its parts and residual dicts for each new message, then the system
prompt and every tool (on every call, whatever the prefix), then throws them all away.
:func:`plainly_valid` walks the same values with type checks and ``dict.get`` only and
answers True when the parse could raise nothing; otherwise the parse runs and names the
error, so every error a harness sees, and its ``param``, still comes from one place (as
:mod:`rolltap.dialects.chat.plain` does for chat).

Sound, not complete: it answers False for shapes it does not know (images, documents,
block types with no canonical form, a system block that is not text, a tool result
holding anything but text), which then take the parse. The tests in
``tests/dialects/test_messages_plain.py`` check that True never lets through a body the
parse refuses.
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import optional, plain_list

__all__ = ["plainly_valid"]


def plainly_valid(body: dict[str, Any], start: int) -> bool:
    """True when :func:`~rolltap.dialects.messages.parse.parse_request_body` (tolerant,
    from message ``start``) certainly accepts ``body``, a JSON object as orjson parses it
    (so a tool call's ``input`` dumps back to JSON) no deeper than the depth limit.

    It assumes nothing that :func:`~rolltap.dialects.messages.dialect.validate_body`
    checks before it, so it can be asked about any such body.
    """
    messages = body.get("messages")
    if type(messages) is not list:
        return False
    for i in range(start, len(messages)):
        if not _plain_message(messages[i]):
            return False
    return (
        _plain_system(body.get("system"))
        and _plain_params(body)
        and _plain_tool_choice(body.get("tool_choice"))
        and plain_list(body.get("tools"), _plain_tool)
    )


def _plain_message(msg: object) -> bool:
    if type(msg) is not dict:
        return False
    role = msg.get("role")
    if role != "user" and role != "assistant":
        return False
    content = msg.get("content")
    if type(content) is str:
        return True
    if type(content) is not list:
        return False
    return all(map(_plain_block, content))


def _plain_block(block: object) -> bool:
    # any role may hold any of these: the parse does not look at the role here
    if type(block) is not dict:
        return False
    kind = block.get("type")
    if kind == "text":
        return type(block.get("text")) is str
    if kind == "tool_use":
        # input is dumped to JSON text: safe for what orjson parsed (see plainly_valid)
        return (
            type(block.get("input")) is dict
            and type(block.get("id")) is str
            and type(block.get("name")) is str
        )
    if kind == "tool_result":
        return _plain_tool_result(block)
    if kind == "thinking":
        signature = block.get("signature")
        return type(block.get("thinking")) is str and (signature is None or type(signature) is str)
    if kind == "redacted_thinking":
        return type(block.get("data")) is str
    return False  # images and the rest: the parse knows which are errors


def _plain_tool_result(block: dict[str, Any]) -> bool:
    is_error = block.get("is_error")
    if type(block.get("tool_use_id")) is not str:
        return False
    if not optional(is_error, bool):
        return False
    content = block.get("content")
    if content is None or type(content) is str:
        return True
    if type(content) is not list:
        return False
    return all(map(_plain_text, content))


def _plain_text(block: object) -> bool:
    return type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str


def _plain_system(system: object) -> bool:
    if system is None or type(system) is str:
        return True
    if type(system) is not list:
        return False
    return all(map(_plain_text, system))


def _plain_params(body: dict[str, Any]) -> bool:
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if not optional(value, float, int):
            return False
    for name in ("max_tokens", "top_k"):
        value = body.get(name)
        if not optional(value, int):
            return False
    model, stream = body.get("model"), body.get("stream")
    if not optional(model, str):
        return False
    if not optional(stream, bool):
        return False
    stop = body.get("stop_sequences")
    if stop is not None and (type(stop) is not list or any(type(s) is not str for s in stop)):
        return False
    metadata = body.get("metadata")
    if metadata is None:
        return True
    if type(metadata) is not dict:
        return False
    user = metadata.get("user_id")
    return user is None or type(user) is str


def _plain_tool_choice(choice: object) -> bool:
    # stricter than the parse, which reads these only of a choice it recognises whole
    if choice is None:
        return True
    if type(choice) is not dict:
        return False
    if choice.get("type") == "tool" and type(choice.get("name")) is not str:
        return False
    no_parallel = choice.get("disable_parallel_tool_use")
    return no_parallel is None or type(no_parallel) is bool


def _plain_tool(tool: dict[str, Any]) -> bool:
    kind = tool.get("type")
    if kind is not None and kind != "custom":
        return True  # a server tool, kept whole as an extra: nothing in it is read
    return (
        type(tool.get("name")) is str
        and type(tool.get("input_schema")) is dict
        and optional(tool.get("strict"), bool)
        and optional(tool.get("description"), str)
    )
