"""Canonical requests to OpenAI Responses bodies (see :mod:`.dialect`)."""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import Ctx, Json, Sink, overlay
from rolltap.dialects.canonical import Message, Request, Text, Tool, ToolChoice
from rolltap.dialects.responses.items import (
    NAME,
    render_assistant,
    render_content,
    render_result,
    render_text,
)
from rolltap.errors import InvalidRequestError

__all__ = ["render_request"]


def render_request(req: Request, sink: Sink | None = None) -> Json:
    """A Responses body for ``req``; what Responses cannot express is decided by the
    translation table, recorded in ``sink`` (none: a 400 naming what the policy covers)."""
    ctx = Ctx(NAME, req.origin, sink=sink)
    extras = ctx.extras(req.extra, "request", "")  # settings first, then the conversation
    _unexpressible(req, ctx)
    body: Json = {} if req.model is None else {"model": req.model}
    instructions, system_items = _system(req.system, ctx)
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = [*system_items, *_conversation(req.messages, ctx)]
    fields: dict[str, Any] = {
        "max_output_tokens": req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stream": req.stream or None,
        "user": req.user,
    }
    body.update((k, v) for k, v in fields.items() if v is not None)
    if req.tools:
        body["tools"] = [_tool(t, f"tools[{k}]", ctx) for k, t in enumerate(req.tools)]
    if req.tool_choice is not None:
        _tool_choice(req.tool_choice, body)
    if "tools" in extras:
        body["tools"] = [*body.get("tools", ()), *extras.pop("tools")]
    if req.reasoning_effort is not None and "reasoning" not in extras:
        body["reasoning"] = {"effort": req.reasoning_effort}
    return overlay(body, extras)


def _unexpressible(req: Request, ctx: Ctx) -> None:
    """Responses has no stop sequences, seed or top_k: each set is the policy's."""
    for field, unset in (("stop", not req.stop), ("seed", req.seed is None)):
        if not unset:
            ctx.lacks("request", field, field)
    if req.top_k is not None:
        ctx.lacks("request", "top_k", "top_k")


def _system(texts: tuple[Text, ...], ctx: Ctx) -> tuple[str | None, list[Json]]:
    """The first plain system text as ``instructions``, the rest as leading messages."""
    instructions: str | None = None
    items: list[Json] = []
    for j, text in enumerate(texts):
        where = f"system[{j}]"
        if j == 0 and "role" not in text.extra and not ctx.extras(text.extra, "part", where):
            instructions = text.text
            continue
        role = text.extra.get("role", "system")
        part = render_text(text, where, ctx, "input_text")
        if items and items[-1]["role"] == role:
            items[-1]["content"].append(part)
        else:
            items.append({"type": "message", "role": role, "content": [part]})
    for item in items:
        content = item["content"]
        if len(content) == 1 and content[0].keys() == {"type", "text"}:
            item["content"] = content[0]["text"]
    return instructions, items


def _conversation(messages: tuple[Message, ...], ctx: Ctx) -> list[Json]:
    out: list[Json] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        extras = ctx.extras(msg.extra, "message", where)
        if msg.role == "tool":
            out.extend(
                render_result(p, f"{where}.parts[{j}]", ctx) for j, p in enumerate(msg.parts)
            )
        elif msg.role == "assistant":
            out.extend(render_assistant(msg.parts, where, ctx, None))
        else:
            role = msg.extra.get("role", "user")  # system/developer text mid-conversation
            content = render_content(msg.parts, f"{where}.parts", ctx)
            out.append(overlay({"type": "message", "role": role, "content": content}, extras))
    return out


def _tool(tool: Tool, where: str, ctx: Ctx) -> Json:
    out: Json = {"type": "function", "name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    out["parameters"] = tool.parameters
    out["strict"] = bool(tool.extra.get("strict"))  # written: Responses' default is on
    return overlay(out, ctx.extras(tool.extra, "tool", where))


def _tool_choice(choice: ToolChoice, body: Json) -> None:
    if choice.mode == "tool":
        if choice.name is None:
            raise InvalidRequestError("must name the tool", field="tool_choice.name")
        body["tool_choice"] = {"type": "function", "name": choice.name}
    else:
        body["tool_choice"] = choice.mode
    if choice.parallel is not None:
        body["parallel_tool_calls"] = choice.parallel
