"""OpenAI Responses request bodies to canonical requests (see :mod:`.dialect`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from rolltap.dialects._shared import (
    Json,
    Tolerance,
    UnsupportedError,
    as_obj,
    opt_bool,
    opt_int,
    opt_list,
    opt_number,
    opt_obj,
    opt_str,
    req_str,
    request_origin,
    residual,
    skip,
)
from rolltap.dialects.canonical import (
    Image,
    Message,
    Part,
    Request,
    Text,
    Tool,
    ToolChoice,
)
from rolltap.dialects.responses.items import (
    NAME,
    call_item,
    content_parts,
    message_texts,
    reasoning_item,
    result_item,
)
from rolltap.errors import InvalidRequestError

__all__ = ["parse_request_body"]

_KNOWN = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "stream",
        "user",
    }
)
_SYSTEM_ROLES = ("system", "developer")
_MESSAGE_KEYS = ("type", "role", "content")
_MODES: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto",
    "none": "none",
    "required": "required",
}


def parse_request_body(body: Json, *, tolerant: Tolerance = False, start: int = 0) -> Request:
    """A Responses request as canonical; ``tolerant`` skips what has no canonical form,
    ``start`` leaves out the first input items (see :mod:`rolltap.dialects.chat.parse`)."""
    extra = residual(body, _KNOWN)
    instructions = opt_str(body, "instructions", "")
    system = [] if instructions is None else [Text(instructions)]
    req = Request(
        messages=_input(body.get("input"), system, tolerant, start),
        model=opt_str(body, "model", ""),
        system=tuple(system),
        tools=_tools(opt_list(body, "tools", "") or [], extra),
        tool_choice=_tool_choice(body, extra),
        max_tokens=opt_int(body, "max_output_tokens", ""),
        temperature=opt_number(body, "temperature", ""),
        top_p=opt_number(body, "top_p", ""),
        stream=bool(opt_bool(body, "stream", "")),
        user=opt_str(body, "user", ""),
        reasoning_effort=_effort(body.get("reasoning")),
        extra=extra,
    )
    return replace(req, origin=request_origin(req, NAME))


def _effort(reasoning: object) -> str | None:
    """``reasoning.effort``; the ``reasoning`` object stays in ``extra`` as sent."""
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    return effort if isinstance(effort, str) else None


def _input(raw: object, system: list[Text], tolerant: Tolerance, start: int) -> tuple[Message, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (Message("user", (Text(raw),)),)
    if not isinstance(raw, list):
        raise InvalidRequestError("must be a string or an array of items", field="input")
    out: list[Message] = []
    for i in range(start, len(raw)):
        item = raw[i]
        where = f"input[{i}]"
        try:
            _item(as_obj(item, where), where, out, system, tolerant)
        except UnsupportedError as exc:
            skip(exc, tolerant)
    return tuple(out)


def _item(
    item: Json, where: str, out: list[Message], system: list[Text], tolerant: Tolerance
) -> None:
    kind = item.get("type", "message")  # an easy input message may leave out its type
    if not isinstance(kind, str):
        raise InvalidRequestError("must be a string", field=f"{where}.type")
    if kind == "message":
        _message(item, where, out, system, tolerant)
    elif kind == "reasoning":
        _add(out, "assistant", reasoning_item(item, where, {}))
    elif kind == "function_call":
        _add(out, "assistant", call_item(item, where, {}))
    elif kind == "function_call_output":
        _add(out, "tool", result_item(item, where, tolerant))
    else:
        raise UnsupportedError(
            f"item type {kind!r} has no canonical form", field=f"{where}.type", kind=f"type={kind}"
        )


def _message(
    item: Json, where: str, out: list[Message], system: list[Text], tolerant: Tolerance
) -> None:
    role = item.get("role")
    if role == "assistant":
        for text in message_texts(item, where, {}, tolerant):
            _add(out, "assistant", text)
        return
    if role not in ("user", *_SYSTEM_ROLES):
        raise InvalidRequestError(
            f"must be user, assistant, system or developer, got {role!r}", field=f"{where}.role"
        )
    parts = content_parts(item.get("content"), f"{where}.content", "input_text", tolerant)
    extra = residual(item, _MESSAGE_KEYS)
    if role == "user":
        out.append(Message("user", tuple(parts), extra))
    elif not out and all(v is None for v in extra.values()):
        system.extend(_system_texts(parts, role, where))  # leading: canonical system
    else:
        out.append(Message("user", tuple(parts), {"role": role, **extra}))


def _system_texts(parts: list[Text | Image], role: str, where: str) -> list[Text]:
    mark = {"role": "developer"} if role == "developer" else {}
    texts: list[Text] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Text):
            raise UnsupportedError("system text only", field=f"{where}.content[{j}]")
        texts.append(Text(part.text, {**mark, **part.extra}))
    return texts


def _add(out: list[Message], role: Literal["assistant", "tool"], part: Part) -> None:
    """Consecutive assistant items are one assistant turn, consecutive outputs one tool turn."""
    if out and out[-1].role == role:
        out[-1] = Message(role, (*out[-1].parts, part), out[-1].extra)
    else:
        out.append(Message(role, (part,)))


def _tools(raw: list[Any], extra: Json) -> tuple[Tool, ...]:
    out: list[Tool] = []
    others: list[Any] = []
    for k, item in enumerate(raw):
        where = f"tools[{k}]"
        tool = as_obj(item, where)
        if tool.get("type") != "function":
            others.append(tool)  # hosted tools (web search, file search...): same-dialect only
            continue
        rest = residual(tool, ("type", "name", "description", "parameters", "strict"))
        if opt_bool(tool, "strict", where) is not False:
            rest["strict"] = True  # Responses functions are strict unless they say otherwise
        name = req_str(tool, "name", where)
        params = opt_obj(tool, "parameters", where) or {}
        out.append(Tool(name, opt_str(tool, "description", where), params, rest))
    if others:
        extra["tools"] = others
    return tuple(out)


def _tool_choice(body: Json, extra: Json) -> ToolChoice | None:
    raw = body.get("tool_choice")
    parallel = opt_bool(body, "parallel_tool_calls", "")
    if raw is None:
        return None if parallel is None else ToolChoice(parallel=parallel)
    if isinstance(raw, str) and raw in _MODES:
        return ToolChoice(_MODES[raw], parallel=parallel)
    if isinstance(raw, dict) and raw.get("type") == "function" and raw.keys() == {"type", "name"}:
        return ToolChoice("tool", req_str(raw, "name", "tool_choice"), parallel)
    extra["tool_choice"] = raw  # allowed_tools, hosted tools: same-dialect only
    if parallel is not None:
        extra["parallel_tool_calls"] = parallel
    return None
