"""Canonical requests to Anthropic Messages bodies (see :mod:`.dialect`)."""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import Ctx, Json, Sink, args_object, overlay
from rolltap.dialects.canonical import (
    Image,
    Message,
    Part,
    Reasoning,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.errors import InvalidRequestError

__all__ = ["DEFAULT_MAX_TOKENS", "assistant_blocks", "render_request"]

NAME = "messages"
DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` written when the canonical request has none (Anthropic requires it)."""

_MODES = {"auto": "auto", "required": "any", "tool": "tool", "none": "none"}
_EMPTY_SCHEMA: Json = {"type": "object", "properties": {}}


def render_request(req: Request, sink: Sink | None = None) -> Json:
    """A Messages body for ``req``; what Messages cannot express is decided by the
    translation table, recorded in ``sink`` (none: a 400 naming what the policy covers)."""
    ctx = Ctx(NAME, req.origin, sink=sink)
    extras = ctx.extras(req.extra, "request", "")  # settings first, then the conversation
    if req.seed is not None:
        ctx.lacks("request", "seed", "seed")
    body: Json = {} if req.model is None else {"model": req.model}
    body["max_tokens"] = DEFAULT_MAX_TOKENS if req.max_tokens is None else req.max_tokens
    lead = 0 if ctx.own else _leading_system(req.messages)
    body["messages"] = _conversation(req.messages, lead, ctx)
    system = [_text(t, f"system[{j}]", ctx) for j, t in enumerate(req.system)]
    for i, msg in enumerate(req.messages[:lead]):  # system entries before any turn
        ctx.extras(msg.extra, "message", f"messages[{i}]")
        system.extend(_user_blocks(msg.parts, f"messages[{i}]", ctx))
    if system:
        body["system"] = _simplify(system)
    fields: dict[str, Any] = {
        "stop_sequences": list(req.stop) or None,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k,
        "stream": req.stream or None,
    }
    body.update((k, v) for k, v in fields.items() if v is not None)
    if req.tools:
        body["tools"] = [_tool(t, f"tools[{k}]", ctx) for k, t in enumerate(req.tools)]
    if req.tool_choice is not None:
        body["tool_choice"] = _tool_choice(req.tool_choice)
    if "tools" in extras:
        body["tools"] = [*body.get("tools", ()), *extras.pop("tools")]
    meta = extras.pop("metadata", None)
    if req.user is not None or meta is not None:
        body["metadata"] = {**(meta or {}), **({} if req.user is None else {"user_id": req.user})}
    if req.reasoning_effort is not None and not {"thinking", "output_config"} & extras.keys():
        body.update(_effort(req.reasoning_effort))
    return overlay(body, extras)


def _effort(effort: str) -> Json:
    """An OpenAI-named effort in Messages' terms: ``none`` turns thinking off, ``minimal``
    is ``low`` (Anthropic's lowest); the others have the same names."""
    if effort == "none":
        return {"thinking": {"type": "disabled"}}
    return {"output_config": {"effort": "low" if effort == "minimal" else effort}}


def _leading_system(messages: tuple[Message, ...]) -> int:
    """How many messages open the conversation as system text (a translated call's:
    Messages says that with ``system``, which every Anthropic-compatible server takes)."""
    count = 0
    while count < len(messages) and "role" in messages[count].extra:
        count += 1
    return count


def _simplify(blocks: list[Json]) -> str | list[Json]:
    """One plain text block as the string the SDKs accept in its place."""
    if len(blocks) == 1 and blocks[0].keys() == {"type", "text"} and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks


def _text(text: Text, where: str, ctx: Ctx) -> Json:
    # a developer role on a system text has no Anthropic spelling: it is system there
    return overlay({"type": "text", "text": text.text}, ctx.extras(text.extra, "part", where))


def _tool(tool: Tool, where: str, ctx: Ctx) -> Json:
    out: Json = {"name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    out["input_schema"] = tool.parameters or _EMPTY_SCHEMA  # required by Anthropic
    if tool.extra.get("strict") is not None:
        out["strict"] = tool.extra["strict"]
    return overlay(out, ctx.extras(tool.extra, "tool", where))


def _tool_choice(choice: ToolChoice) -> Json:
    out: Json = {"type": _MODES[choice.mode]}
    if choice.mode == "tool":
        if choice.name is None:
            raise InvalidRequestError("must name the tool", field="tool_choice.name")
        out["name"] = choice.name
    if choice.parallel is not None:
        out["disable_parallel_tool_use"] = not choice.parallel
    return out


def _conversation(messages: tuple[Message, ...], lead: int, ctx: Ctx) -> list[Json]:
    """The conversation past its first ``lead`` messages (lifted into ``system``)."""
    out: list[Json] = []
    open_results = False  # the last native message holds tool results a user turn may join
    for i in range(lead, len(messages)):
        msg, where = messages[i], f"messages[{i}]"
        extras = ctx.extras(msg.extra, "message", where)
        if "role" in msg.extra:  # system (or developer) text in place: Anthropic's beta
            content = _simplify(_user_blocks(msg.parts, where, ctx))
            out.append(overlay({"role": "system", "content": content}, extras))
        elif msg.role == "tool":
            blocks = [_tool_result(p, f"{where}.parts[{j}]", ctx) for j, p in enumerate(msg.parts)]
            out.append(overlay({"role": "user", "content": blocks}, extras))
        elif msg.role == "user" and open_results:
            out[-1]["content"].extend(_user_blocks(msg.parts, where, ctx))
            out[-1] = overlay(out[-1], extras)
        elif msg.role == "user":
            content = _simplify(_user_blocks(msg.parts, where, ctx))
            out.append(overlay({"role": "user", "content": content}, extras))
        else:
            content = _simplify(assistant_blocks(msg.parts, where, ctx))
            out.append(overlay({"role": "assistant", "content": content}, extras))
        open_results = msg.role == "tool" and "role" not in msg.extra
    return out


def _user_blocks(parts: tuple[Part, ...], where: str, ctx: Ctx) -> list[Json]:
    out: list[Json] = []
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if isinstance(part, Text):
            out.append(_text(part, at, ctx))
        elif isinstance(part, Image):
            out.append(_image(part, at, ctx))
        else:
            raise InvalidRequestError("user messages hold only text and images", field=at)
    return out


def _image(image: Image, where: str, ctx: Ctx) -> Json:
    source: Json
    if image.source == "url":
        source = {"type": "url", "url": image.data}
    elif image.media_type is None:
        raise InvalidRequestError("inline images need a media type", field=f"{where}.media_type")
    else:
        source = {"type": "base64", "media_type": image.media_type, "data": image.data}
    if image.extra.get("detail") is not None and not ctx.own:
        ctx.lacks("part", f"{where}.detail", "detail")  # a resolution hint: none here
    return overlay({"type": "image", "source": source}, ctx.extras(image.extra, "part", where))


def _tool_result(part: Part, where: str, ctx: Ctx) -> Json:
    if not isinstance(part, ToolResult):
        raise InvalidRequestError("tool messages hold only tool results", field=where)
    out: Json = {"type": "tool_result", "tool_use_id": part.call_id}
    content = [
        _text(c, f"{where}.content[{m}]", ctx)
        if isinstance(c, Text)
        else _image(c, f"{where}.content[{m}]", ctx)
        for m, c in enumerate(part.content)
    ]
    if content:
        out["content"] = _simplify(content)
    if part.is_error:
        out["is_error"] = True
    return overlay(out, ctx.extras(part.extra, "part", where))


def assistant_blocks(parts: tuple[Part, ...], where: str, ctx: Ctx) -> list[Json]:
    """An assistant turn's blocks: text, thinking, redacted_thinking, tool_use."""
    out: list[Json] = []
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if isinstance(part, Text):
            out.append(_text(part, at, ctx))
        elif isinstance(part, ToolCall):
            block = {
                "type": "tool_use",
                "id": part.id,
                "name": part.name,
                "input": args_object(part.arguments, f"{at}.arguments"),
            }
            out.append(overlay(block, ctx.extras(part.extra, "part", at)))
        elif isinstance(part, Reasoning):
            out.extend(_thinking(part, at, ctx))
        else:
            raise InvalidRequestError("assistant messages hold no such part", field=at)
    return out


def _thinking(part: Reasoning, where: str, ctx: Ctx) -> list[Json]:
    kept = ctx.extras(part.extra, "part", where)
    if not ctx.own and part.signature:  # another provider's: opaque here
        ctx.lacks("part", f"{where}.signature", "signature")
    if not ctx.own and not part.text and (part.signature or part.extra):
        return []  # another dialect's opaque reasoning (encrypted, redacted)
    if kept.get("type") == "redacted_thinking":
        return [overlay({"type": "redacted_thinking", "data": part.signature or ""}, kept)]
    # the field is required; another dialect's signature means nothing here
    signature = part.signature if ctx.own and part.signature else ""
    block: Json = {"type": "thinking", "thinking": part.text, "signature": signature}
    return [overlay(block, kept)]
