"""Canonical requests to chat-completions bodies (see :mod:`.dialect`)."""

from __future__ import annotations

from typing import Any

from rolltap.dialects._shared import Ctx, Json, Sink, image_url, overlay
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

__all__ = ["render_call", "render_request"]

NAME = "chat"


def render_request(req: Request, sink: Sink | None = None) -> Json:
    """A chat body for ``req``; what chat cannot express is decided by the translation
    table, recorded in ``sink`` (none: a 400 naming what the policy covers)."""
    ctx = Ctx(NAME, req.origin, sink=sink)
    extras = ctx.extras(req.extra, "request", "")  # settings first, then the conversation
    body: Json = {} if req.model is None else {"model": req.model}
    body["messages"] = [*_system(req.system, ctx), *_conversation(req.messages, ctx)]
    _sampling(req, body)
    if req.tools:
        body["tools"] = [_tool(t, f"tools[{k}]", ctx) for k, t in enumerate(req.tools)]
    if req.tool_choice is not None:
        _tool_choice(req.tool_choice, body)
    if "tools" in extras:  # kept non-function tools go after the function ones
        body["tools"] = [*body.get("tools", ()), *extras.pop("tools")]
    if "max_completion_tokens" in extras:  # the name it was sent with, today's value
        value = body.pop("max_tokens", None)
        extras["max_completion_tokens"] = value
        if value is None:
            del extras["max_completion_tokens"]
    return overlay(body, extras)


def _sampling(req: Request, body: Json) -> None:
    fields: dict[str, Any] = {
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k,  # vLLM and llama.cpp accept it as an extension
        "stop": list(req.stop) or None,
        "seed": req.seed,
        "stream": req.stream or None,
        "user": req.user,
        "reasoning_effort": req.reasoning_effort,
    }
    body.update((k, v) for k, v in fields.items() if v is not None)


def _tool(tool: Tool, where: str, ctx: Ctx) -> Json:
    fn: Json = {"name": tool.name}
    if tool.description is not None:
        fn["description"] = tool.description
    if tool.parameters:
        fn["parameters"] = tool.parameters
    if tool.extra.get("strict") is not None:
        fn["strict"] = tool.extra["strict"]
    return overlay({"type": "function", "function": fn}, ctx.extras(tool.extra, "tool", where))


def _tool_choice(choice: ToolChoice, body: Json) -> None:
    if choice.mode == "tool":
        if choice.name is None:
            raise InvalidRequestError("must name the tool", field="tool_choice.name")
        body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    else:
        body["tool_choice"] = choice.mode
    if choice.parallel is not None:
        body["parallel_tool_calls"] = choice.parallel


def _role(role: str, ctx: Ctx) -> str:
    """A system text's role: a translated developer text is a system one (the chat
    templates of open models know no developer role; OpenAI reads the two alike)."""
    translated = ctx.sink.source not in (None, NAME)
    return "system" if translated and role == "developer" else role


def _system(texts: tuple[Text, ...], ctx: Ctx) -> list[Json]:
    out: list[Json] = []
    for j, text in enumerate(texts):
        role = _role(text.extra.get("role", "system"), ctx)
        part = _text(text, f"system[{j}]", ctx)
        if out and out[-1]["role"] == role:  # consecutive texts of one role: one message
            out[-1]["content"].append(part)
        else:
            out.append({"role": role, "content": [part]})
    return [_simplify(m) for m in out]


def _simplify(msg: Json) -> Json:
    """A one-text content array as the plain string chat SDKs send."""
    content = msg.get("content")
    if isinstance(content, list) and len(content) == 1 and content[0].keys() == {"type", "text"}:
        return {**msg, "content": content[0]["text"]}
    return msg


def _text(text: Text, where: str, ctx: Ctx) -> Json:
    return overlay({"type": "text", "text": text.text}, ctx.extras(text.extra, "part", where))


def _conversation(messages: tuple[Message, ...], ctx: Ctx) -> list[Json]:
    out: list[Json] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if msg.role == "tool":
            out.extend(_tool_results(msg, where, ctx))
            continue
        if msg.role == "user":
            rendered = _user(msg, where, ctx)
        else:
            rendered = _assistant(msg.parts, where, ctx)
        out.append(overlay(rendered, ctx.extras(msg.extra, "message", where)))
    return out


def _user(msg: Message, where: str, ctx: Ctx) -> Json:
    parts: list[Json] = []
    for j, part in enumerate(msg.parts):
        at = f"{where}.parts[{j}]"
        if isinstance(part, Text):
            parts.append(_text(part, at, ctx))
        elif isinstance(part, Image):
            parts.append(_image(part, at, ctx))
        else:
            raise InvalidRequestError("chat user messages hold only text and images", field=at)
    role = _role(msg.extra.get("role", "user"), ctx)  # a system/developer message in place
    return _simplify({"role": role, "content": parts})


def _image(image: Image, where: str, ctx: Ctx) -> Json:
    url: Json = {"url": image_url(image)}
    if image.extra.get("detail") is not None:
        url["detail"] = image.extra["detail"]
    base = {"type": "image_url", "image_url": url}
    return overlay(base, ctx.extras(image.extra, "part", where))


def _tool_results(msg: Message, where: str, ctx: Ctx) -> list[Json]:
    out: list[Json] = []
    extras = ctx.extras(msg.extra, "message", where)
    for j, part in enumerate(msg.parts):
        at = f"{where}.parts[{j}]"
        if not isinstance(part, ToolResult):
            raise InvalidRequestError("tool messages hold only tool results", field=at)
        content = _result_texts(part, at, ctx)
        if part.is_error:  # chat has no such flag (the text says what failed)
            ctx.lacks("part", f"{at}.is_error", "is_error")
        rendered = _simplify({"role": "tool", "tool_call_id": part.call_id, "content": content})
        if not content:
            rendered["content"] = ""
        out.append(overlay(overlay(rendered, extras), ctx.extras(part.extra, "part", at)))
    return out


def _result_texts(part: ToolResult, where: str, ctx: Ctx) -> list[Json]:
    """A tool result's texts; an image there is the policy's (chat's carry text only)."""
    out: list[Json] = []
    for m, item in enumerate(part.content):
        at = f"{where}.content[{m}]"
        if isinstance(item, Text):
            out.append(_text(item, at, ctx))
        else:
            ctx.lacks("part", at, "image")
    return out


def _assistant(parts: tuple[Part, ...], where: str, ctx: Ctx) -> Json:
    """A chat assistant message: ``reasoning_content``, ``content``, ``tool_calls``.

    Chat has one slot of each, so text written after a tool call moves before it.
    """
    msg: Json = {"role": "assistant"}
    texts: list[Json] = []
    calls: list[Json] = []
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if isinstance(part, Reasoning):
            _reasoning(part, msg, at, ctx)
        elif isinstance(part, Text):
            texts.append(_text(part, at, ctx))
        elif isinstance(part, ToolCall):
            calls.append(render_call(part, at, ctx))
        else:
            raise InvalidRequestError("chat assistant messages hold no such part", field=at)
    msg["content"] = _simplify({"content": texts})["content"] if texts else None
    if calls:
        msg["tool_calls"] = calls
    return msg


def _reasoning(part: Reasoning, msg: Json, where: str, ctx: Ctx) -> None:
    if not ctx.own and part.signature:  # another provider's: opaque here
        ctx.lacks("part", f"{where}.signature", "signature")
    if not ctx.own and not part.text and (part.signature or part.extra):
        ctx.extras(part.extra, "part", where)
        return  # opaque reasoning of another dialect (redacted, encrypted): nothing to say
    if "reasoning_content" in msg or "reasoning" in msg:
        if ctx.own:
            raise InvalidRequestError("chat holds one reasoning text per message", field=where)
        ctx.lacks("part", where, "reasoning")  # the first one stays
        return
    kept = ctx.extras(part.extra, "part", where)
    for key in kept.get("fields", ["reasoning_content"]):  # the key(s) it was sent under
        msg[key] = part.text


def render_call(call: ToolCall, where: str, ctx: Ctx) -> Json:
    base = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    return overlay(base, ctx.extras(call.extra, "part", where))
