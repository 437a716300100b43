"""Anthropic Messages request bodies to canonical requests (see :mod:`.dialect`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from rolltap.dialects._shared import (
    Json,
    Tolerance,
    UnsupportedError,
    as_obj,
    collect,
    dumps_json,
    opt_bool,
    opt_int,
    opt_list,
    opt_number,
    opt_obj,
    opt_str,
    req_list,
    req_obj,
    req_str,
    request_origin,
    residual,
    skip,
)
from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.errors import InvalidRequestError

__all__ = ["NAME", "assistant_block", "parse_request_body", "reasoning_effort"]

NAME = "messages"

_KNOWN = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "tools",
        "tool_choice",
    }
)
_MODES: dict[str, Literal["auto", "none", "required", "tool"]] = {
    "auto": "auto",
    "any": "required",
    "tool": "tool",
    "none": "none",
}


def parse_request_body(body: Json, *, tolerant: Tolerance = False, start: int = 0) -> Request:
    """A Messages request as canonical; ``tolerant`` skips what has no canonical form,
    ``start`` leaves out the first messages (see :mod:`rolltap.dialects.chat.parse`)."""
    extra = residual(body, _KNOWN)
    req = Request(
        messages=_messages(req_list(body, "messages", ""), tolerant, start),
        model=opt_str(body, "model", ""),
        system=_system(body.get("system"), tolerant),
        tools=_tools(opt_list(body, "tools", "") or [], extra),
        tool_choice=_tool_choice(opt_obj(body, "tool_choice", ""), extra),
        max_tokens=opt_int(body, "max_tokens", ""),
        temperature=opt_number(body, "temperature", ""),
        top_p=opt_number(body, "top_p", ""),
        top_k=opt_int(body, "top_k", ""),
        stop=_stop_sequences(opt_list(body, "stop_sequences", "") or []),
        stream=bool(opt_bool(body, "stream", "")),
        user=_metadata(opt_obj(body, "metadata", ""), extra),
        reasoning_effort=reasoning_effort(body),
        extra=extra,
    )
    return replace(req, origin=request_origin(req, NAME))


#: a thinking budget's effort: under 4096 tokens low, under 16384 medium, else high
_BUDGETS = ((4096, "low"), (16384, "medium"))


def reasoning_effort(body: Json) -> str | None:
    """The canonical (OpenAI-named) effort of ``output_config.effort`` (``max`` is
    ``xhigh``), else of ``thinking``'s budget; None when neither says one (``adaptive``
    thinking alone leaves it to the model). Both stay in ``extra`` as sent.

    >>> reasoning_effort({"thinking": {"type": "enabled", "budget_tokens": 8000}})
    'medium'
    >>> reasoning_effort({"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}})
    'xhigh'
    """
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    if isinstance(effort, str):
        return "xhigh" if effort == "max" else effort
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        return None
    return next((name for limit, name in _BUDGETS if budget < limit), "high")


def _stop_sequences(raw: list[Any]) -> tuple[str, ...]:
    if not all(isinstance(s, str) for s in raw):
        raise InvalidRequestError("must be an array of strings", field="stop_sequences")
    return tuple(raw)


def _metadata(meta: Json | None, extra: Json) -> str | None:
    if meta is None:
        return None
    user = opt_str(meta, "user_id", "metadata")
    rest = residual(meta, ("user_id",) if user is not None else ())
    if rest or user is None:
        extra["metadata"] = rest  # only user_id has a canonical home
    return user


def _system(raw: object, tolerant: Tolerance) -> tuple[Text, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (Text(raw),)
    if not isinstance(raw, list):
        raise InvalidRequestError("must be a string or an array of text blocks", field="system")

    def text(j: int, block: object) -> Text:
        part = _block(block, f"system[{j}]", tolerant)
        if not isinstance(part, Text):
            raise InvalidRequestError("must be a text block", field=f"system[{j}].type")
        return part

    return tuple(collect(raw, text, tolerant))


def _messages(raw: list[Any], tolerant: Tolerance, start: int) -> tuple[Message, ...]:
    out: list[Message] = []
    for i in range(start, len(raw)):
        item = raw[i]
        where = f"messages[{i}]"
        msg = as_obj(item, where)
        role = msg.get("role")
        if role not in ("user", "assistant", "system"):
            raise InvalidRequestError(
                f"must be 'user', 'assistant' or 'system', got {role!r}", field=f"{where}.role"
            )
        parts = _content(msg.get("content"), where, tolerant)
        extra = residual(msg, ("role", "content"))
        if role == "system":  # a mid-conversation system entry (a beta): kept in place
            out.append(Message("user", _texts(parts, where, tolerant), {"role": "system", **extra}))
        elif role == "assistant":
            _append(out, Message("assistant", tuple(parts), extra))
        else:
            _split_user(out, parts, extra)
    return tuple(out)


def _texts(parts: list[Any], where: str, tolerant: Tolerance) -> tuple[Text, ...]:
    """A system entry's texts (the canonical model has no other system content)."""
    texts: list[Text] = []
    for j, part in enumerate(parts):
        if isinstance(part, Text):
            texts.append(part)
        else:
            error = UnsupportedError("system entries hold only text", field=f"{where}.content[{j}]")
            skip(error, tolerant)
    return tuple(texts)


def _split_user(out: list[Message], parts: list[Any], extra: Json) -> None:
    """A user message's tool results become canonical tool messages, the rest user ones."""
    if not parts:
        _append(out, Message("user", (), extra))
    run: list[Any] = []
    for k, part in enumerate(parts):
        run.append(part)
        last = k == len(parts) - 1
        if last or isinstance(part, ToolResult) != isinstance(parts[k + 1], ToolResult):
            role: Literal["tool", "user"] = "tool" if isinstance(part, ToolResult) else "user"
            _append(out, Message(role, tuple(run), extra))
            run, extra = [], {}  # the native message's extras ride on its first piece


def _append(out: list[Message], msg: Message) -> None:
    # tool results of consecutive user messages are one canonical tool turn
    if msg.role == "tool" and out and out[-1].role == "tool" and not msg.extra:
        out[-1] = Message("tool", out[-1].parts + msg.parts, out[-1].extra)
    else:
        out.append(msg)


def _content(raw: object, where: str, tolerant: Tolerance) -> list[Any]:
    if isinstance(raw, str):
        return [Text(raw)]
    if not isinstance(raw, list):
        raise InvalidRequestError(
            "must be a string or an array of blocks", field=f"{where}.content"
        )
    return collect(raw, lambda j, b: _block(b, f"{where}.content[{j}]", tolerant), tolerant)


def _block(
    raw: object, where: str, tolerant: Tolerance
) -> Text | Image | ToolResult | ToolCall | Reasoning:
    block = as_obj(raw, where)
    kind = req_str(block, "type", where)
    if kind == "image":
        return _image(block, where)
    if kind == "tool_result":
        return _tool_result(block, where, tolerant)
    return assistant_block(block, kind, where)


def assistant_block(block: Json, kind: str, where: str) -> Text | ToolCall | Reasoning:
    """A text, thinking, redacted_thinking or tool_use block as a canonical part."""
    if kind == "text":
        return Text(req_str(block, "text", where), residual(block, ("type", "text")))
    if kind == "thinking":
        extra = residual(block, ("type", "thinking", "signature"))
        thinking = req_str(block, "thinking", where)
        # "" is how the renderer spells "no signature" (the field is required)
        return Reasoning(thinking, opt_str(block, "signature", where) or None, extra)
    if kind == "redacted_thinking":
        extra = {"type": kind, **residual(block, ("type", "data"))}
        return Reasoning("", req_str(block, "data", where), extra)
    if kind == "tool_use":
        args = dumps_json(req_obj(block, "input", where))
        extra = residual(block, ("type", "id", "name", "input"))
        return ToolCall(req_str(block, "id", where), req_str(block, "name", where), args, extra)
    raise UnsupportedError(
        f"block type {kind!r} has no canonical form", field=f"{where}.type", kind=f"type={kind}"
    )


def _image(block: Json, where: str) -> Image:
    source = req_obj(block, "source", where)
    at = f"{where}.source"
    kind = req_str(source, "type", at)
    extra = residual(block, ("type", "source"))
    if kind == "base64":
        image = Image("base64", req_str(source, "data", at), req_str(source, "media_type", at))
        rest = residual(source, ("type", "data", "media_type"))
    elif kind == "url":
        image = Image("url", req_str(source, "url", at))
        rest = residual(source, ("type", "url"))
    else:
        raise UnsupportedError(f"image source {kind!r} has no canonical form", field=f"{at}.type")
    if rest:
        extra["source"] = rest
    return replace(image, extra=extra)


def _tool_result(block: Json, where: str, tolerant: Tolerance) -> ToolResult:
    raw = block.get("content")
    content: list[Any] = [] if raw is None else _content(raw, where, tolerant)
    for m, part in enumerate(content):
        if not isinstance(part, Text | Image):
            raise UnsupportedError("holds only text and images", field=f"{where}.content[{m}]")
    return ToolResult(
        req_str(block, "tool_use_id", where),
        tuple(content),
        bool(opt_bool(block, "is_error", where)),
        residual(block, ("type", "tool_use_id", "content", "is_error")),
    )


def _tools(raw: list[Any], extra: Json) -> tuple[Tool, ...]:
    out: list[Tool] = []
    others: list[Any] = []
    for k, item in enumerate(raw):
        where = f"tools[{k}]"
        tool = as_obj(item, where)
        if tool.get("type") not in (None, "custom"):
            others.append(tool)  # server tools (web search, bash...): same-dialect only
            continue
        schema = req_obj(tool, "input_schema", where)
        rest = residual(tool, ("name", "description", "input_schema", "strict"))
        if opt_bool(tool, "strict", where):
            rest["strict"] = True  # canonical: present only when on
        name = req_str(tool, "name", where)
        out.append(Tool(name, opt_str(tool, "description", where), schema, rest))
    if others:
        extra["tools"] = others
    return tuple(out)


def _tool_choice(raw: Json | None, extra: Json) -> ToolChoice | None:
    if raw is None:
        return None
    kind = raw.get("type")
    rest = residual(raw, ("type", "name", "disable_parallel_tool_use"))
    if not isinstance(kind, str) or kind not in _MODES or rest:
        extra["tool_choice"] = raw
        return None
    name = req_str(raw, "name", "tool_choice") if kind == "tool" else None
    no_parallel = opt_bool(raw, "disable_parallel_tool_use", "tool_choice")
    return ToolChoice(_MODES[kind], name, None if no_parallel is None else not no_parallel)
