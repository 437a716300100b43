"""Chat-completions request bodies to canonical requests (see :mod:`.dialect`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from rolltap.dialects._shared import (
    Json,
    Tolerance,
    UnsupportedError,
    as_obj,
    collect,
    image_from_url,
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

__all__ = ["NAME", "assistant_parts", "parse_request_body"]

NAME = "chat"

_KNOWN = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop",
        "seed",
        "stream",
        "user",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
    }
)
_SYSTEM_ROLES = ("system", "developer")
_REASONING_KEYS = ("reasoning_content", "reasoning")
_MODES: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto",
    "none": "none",
    "required": "required",
}


def parse_request_body(body: Json, *, tolerant: Tolerance = False, start: int = 0) -> Request:
    """A chat request as canonical; ``tolerant`` skips what has no canonical form.

    ``start``: the first ``start`` messages are left out (validation of messages past a
    prefix checked before; their errors name their place in the whole list).
    """
    system, messages = _messages(req_list(body, "messages", ""), tolerant, start)
    extra = residual(body, _KNOWN)
    tools = _tools(opt_list(body, "tools", "") or [], extra)
    req = Request(
        messages=messages,
        model=opt_str(body, "model", ""),
        system=system,
        tools=tools,
        tool_choice=_tool_choice(body, extra),
        max_tokens=_max_tokens(body, extra),
        temperature=opt_number(body, "temperature", ""),
        top_p=opt_number(body, "top_p", ""),
        top_k=opt_int(body, "top_k", ""),
        stop=_stop(body.get("stop")),
        seed=opt_int(body, "seed", ""),
        stream=bool(opt_bool(body, "stream", "")),
        user=opt_str(body, "user", ""),
        reasoning_effort=opt_str(body, "reasoning_effort", ""),
        extra=extra,
    )
    return replace(req, origin=request_origin(req, NAME))


def _max_tokens(body: Json, extra: Json) -> int | None:
    # max_completion_tokens is the current name, max_tokens the deprecated one; the
    # spelling is kept in extra so a chat renderer writes the name it was sent
    legacy = opt_int(body, "max_tokens", "")
    current = opt_int(body, "max_completion_tokens", "")
    if current is None:
        return legacy
    extra["max_completion_tokens"] = current
    if legacy is not None:
        extra["max_tokens"] = legacy
    return current


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise InvalidRequestError("must be a string or an array of strings", field="stop")


def _messages(
    raw: list[Any], tolerant: Tolerance, start: int
) -> tuple[tuple[Text, ...], tuple[Message, ...]]:
    system: list[Text] = []
    out: list[Message] = []
    for i in range(start, len(raw)):
        item = raw[i]
        where = f"messages[{i}]"
        msg = as_obj(item, where)
        try:
            if not out and _plain_system(msg):
                system.extend(_system_texts(msg, where, tolerant))
                continue
            _append(out, _message(msg, where, tolerant))
        except UnsupportedError as exc:
            skip(exc, tolerant)
    return tuple(system), tuple(out)


def _plain_system(msg: Json) -> bool:
    """A leading system/developer message with nothing but text becomes canonical system."""
    if msg.get("role") not in _SYSTEM_ROLES:
        return False
    return all(v is None for v in residual(msg, ("role", "content")).values())


def _system_texts(msg: Json, where: str, tolerant: Tolerance) -> list[Text]:
    mark = {"role": "developer"} if msg["role"] == "developer" else {}
    texts = _texts(msg.get("content"), where, tolerant)
    return [Text(t.text, {**mark, **t.extra}) for t in texts]


def _append(out: list[Message], msg: Message) -> None:
    # consecutive chat tool messages are one canonical tool turn
    if msg.role == "tool" and out and out[-1].role == "tool":
        out[-1] = Message("tool", out[-1].parts + msg.parts)
    else:
        out.append(msg)


def _message(msg: Json, where: str, tolerant: Tolerance) -> Message:
    role = msg.get("role")
    if role in _SYSTEM_ROLES:
        extra = {"role": role, **residual(msg, ("role", "content"))}
        return Message("user", tuple(_texts(msg.get("content"), where, tolerant)), extra)
    if role == "user":
        parts = _user_parts(msg.get("content"), where, tolerant)
        return Message("user", parts, residual(msg, ("role", "content")))
    if role == "assistant":
        asst, rest = assistant_parts(msg, where, tolerant)
        return Message("assistant", tuple(asst), rest)
    if role == "tool":
        call_id = req_str(msg, "tool_call_id", where)
        content = tuple(_texts(msg.get("content"), where, tolerant))
        extra = residual(msg, ("role", "content", "tool_call_id"))
        return Message("tool", (ToolResult(call_id, content, extra=extra),))
    raise UnsupportedError(
        f"role {role!r} has no canonical form", field=f"{where}.role", kind=f"role={role}"
    )


def _texts(content: object, where: str, tolerant: Tolerance) -> list[Text]:
    def text(j: int, raw: object) -> Text:
        part = _part(raw, f"{where}.content[{j}]")
        if not isinstance(part, Text):
            raise UnsupportedError("only text parts belong here", field=f"{where}.content[{j}]")
        return part

    if content is None or isinstance(content, str):
        return [p for p in _user_parts(content, where, tolerant) if isinstance(p, Text)]
    return collect(_parts_list(content, where), text, tolerant)


def _user_parts(content: object, where: str, tolerant: Tolerance) -> tuple[Text | Image, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),)
    parts = _parts_list(content, where)
    return tuple(collect(parts, lambda j, p: _part(p, f"{where}.content[{j}]"), tolerant))


def _parts_list(content: object, where: str) -> list[Any]:
    if not isinstance(content, list):
        raise InvalidRequestError(
            "must be a string, an array of parts or null", field=f"{where}.content"
        )
    return content


def _part(raw: object, where: str) -> Text | Image:
    part = as_obj(raw, where)
    kind = req_str(part, "type", where)
    if kind == "text":
        return Text(req_str(part, "text", where), residual(part, ("type", "text")))
    if kind == "image_url":
        url_obj = req_obj(part, "image_url", where)
        url = req_str(url_obj, "url", f"{where}.image_url")
        extra = residual(part, ("type", "image_url"))
        if url_obj.get("detail") is not None:
            extra["detail"] = url_obj["detail"]
        rest = residual(url_obj, ("url", "detail"))
        if rest:
            extra["image_url"] = rest
        return image_from_url(url, extra)
    raise UnsupportedError(
        f"part type {kind!r} has no canonical form", field=f"{where}.type", kind=f"type={kind}"
    )


def assistant_parts(
    msg: Json, where: str, tolerant: Tolerance = False
) -> tuple[list[Text | ToolCall | Reasoning], Json]:
    """An assistant message's reasoning, text and tool calls (in that order), and the
    fields of ``msg`` left over."""
    parts: list[Text | ToolCall | Reasoning] = []
    keys = [k for k in _REASONING_KEYS if isinstance(msg.get(k), str)]
    if len(keys) == 2 and msg[keys[0]] != msg[keys[1]]:
        keys = keys[:1]  # two different texts: the second stays an extra
    if keys:
        spelling = {} if keys == ["reasoning_content"] else {"fields": keys}
        parts.append(Reasoning(msg[keys[0]], extra=spelling))
    content = msg.get("content")
    if content is not None:
        parts.extend(_texts(content, where, tolerant))
    calls = opt_list(msg, "tool_calls", where) or []
    parts.extend(collect(calls, lambda j, c: _tool_call(c, f"{where}.tool_calls[{j}]"), tolerant))
    # an empty tool_calls list (vLLM always sends one) stays an extra, to render back
    consumed = ("role", "content", *keys, *(("tool_calls",) if calls else ()))
    return parts, residual(msg, consumed)


def _tool_call(raw: object, where: str) -> ToolCall:
    call = as_obj(raw, where)
    if call.get("type", "function") != "function":
        kind = call["type"]
        raise UnsupportedError(
            f"tool call type {kind!r}", field=f"{where}.type", kind=f"type={kind}"
        )
    fn = req_obj(call, "function", where)
    extra = residual(call, ("id", "type", "function"))
    rest = residual(fn, ("name", "arguments"))
    if rest:
        extra["function"] = rest
    return ToolCall(
        req_str(call, "id", where),
        req_str(fn, "name", f"{where}.function"),
        req_str(fn, "arguments", f"{where}.function"),
        extra,
    )


def _tools(raw: list[Any], extra: Json) -> tuple[Tool, ...]:
    out: list[Tool] = []
    others: list[Any] = []
    for k, item in enumerate(raw):
        where = f"tools[{k}]"
        tool = as_obj(item, where)
        if tool.get("type", "function") != "function":
            others.append(tool)  # e.g. custom tools: same-dialect only, kept whole
            continue
        fn = req_obj(tool, "function", where)
        tool_extra = residual(tool, ("type", "function"))
        if opt_bool(fn, "strict", f"{where}.function"):
            tool_extra["strict"] = True  # canonical: present only when on (chat's default is off)
        rest = residual(fn, ("name", "description", "parameters", "strict"))
        if rest:
            tool_extra["function"] = rest
        out.append(
            Tool(
                req_str(fn, "name", f"{where}.function"),
                opt_str(fn, "description", f"{where}.function"),
                opt_obj(fn, "parameters", f"{where}.function") or {},
                tool_extra,
            )
        )
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
    if isinstance(raw, dict) and raw.get("type") == "function":
        fn = req_obj(raw, "function", "tool_choice")
        return ToolChoice("tool", req_str(fn, "name", "tool_choice.function"), parallel)
    extra["tool_choice"] = raw  # e.g. allowed_tools: same-dialect only
    if parallel is not None:
        extra["parallel_tool_calls"] = parallel
    return None
