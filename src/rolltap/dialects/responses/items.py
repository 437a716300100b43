"""Responses items to and from canonical parts, for request ``input`` and response ``output``.

An assistant turn is a run of items (``reasoning``, assistant ``message``,
``function_call``); each becomes one or more parts of one canonical assistant message.
An assistant message item's own fields (``id``, ``status``) ride on its first text as
``extra["item"]``, which also tells the renderer where the next item starts.

Output items need ids and a status; :data:`ItemIds` gives the defaults the renderer
writes when a part carries none, and the parser leaves such defaults out of extras.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rolltap.dialects._shared import (
    Ctx,
    Json,
    Tolerance,
    UnsupportedError,
    as_obj,
    collect,
    image_from_url,
    image_url,
    opt_list,
    opt_str,
    overlay,
    req_str,
    residual,
)
from rolltap.dialects.canonical import Image, Part, Reasoning, Text, ToolCall, ToolResult
from rolltap.errors import InvalidRequestError

__all__ = [
    "NAME",
    "ItemIds",
    "call_item",
    "content_parts",
    "message_texts",
    "reasoning_item",
    "render_assistant",
    "render_content",
    "render_result",
    "render_text",
    "result_item",
]

NAME = "responses"

ItemIds = Callable[[str, int], Json]
"""(item type, index in ``output``) -> the default ``id``/``status`` of an output item."""


def _strip(extra: Json, defaults: Json) -> Json:
    return {k: v for k, v in extra.items() if k not in defaults or defaults[k] != v}


# --- parsing -------------------------------------------------------------------------


def content_parts(
    raw: object, where: str, default_type: str, tolerant: Tolerance = False
) -> list[Text | Image]:
    """A message's content: a string, or ``input_text``/``output_text``/``refusal``/
    ``input_image`` parts (``tolerant``: see :func:`collect`)."""
    if isinstance(raw, str):
        return [Text(raw)]
    if not isinstance(raw, list):
        raise InvalidRequestError("must be a string or an array of parts", field=where)
    return collect(raw, lambda j, p: _part(p, f"{where}[{j}]", default_type), tolerant)


def _part(raw: object, where: str, default_type: str) -> Text | Image:
    part = as_obj(raw, where)
    kind = req_str(part, "type", where)
    if kind in ("input_text", "output_text"):
        extra = residual(part, ("type", "text"))
        if kind == "output_text" and extra.get("annotations") == []:
            del extra["annotations"]  # the renderer writes the empty list
        if kind != default_type:
            extra["type"] = kind
        return Text(req_str(part, "text", where), extra)
    if kind == "refusal":
        return Text(
            req_str(part, "refusal", where), {"type": kind, **residual(part, ("type", "refusal"))}
        )
    if kind == "input_image":
        url = opt_str(part, "image_url", where)
        if url is None:
            raise UnsupportedError(
                "images by file_id have no canonical form", field=f"{where}.file_id"
            )
        extra = residual(part, ("type", "image_url", "detail"))
        if part.get("detail") not in (None, "auto"):
            extra["detail"] = part["detail"]
        return image_from_url(url, extra)
    raise UnsupportedError(
        f"part type {kind!r} has no canonical form", field=f"{where}.type", kind=f"type={kind}"
    )


def message_texts(
    item: Json, where: str, defaults: Json, tolerant: Tolerance = False
) -> list[Text]:
    """An assistant message item's texts; its own fields go on the first one."""
    parts = content_parts(item.get("content"), f"{where}.content", "output_text", tolerant)
    texts: list[Text] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Text):
            raise UnsupportedError(
                "assistant messages hold no images", field=f"{where}.content[{j}]"
            )
        texts.append(part)
    own = _strip(residual(item, ("type", "role", "content")), defaults)
    if own and texts:
        texts[0] = Text(texts[0].text, {"item": own, **texts[0].extra})
    return texts


def reasoning_item(item: Json, where: str, defaults: Json) -> Reasoning:
    """A reasoning item: its summary texts (else its reasoning_text content) joined by
    blank lines, ``encrypted_content`` as the signature."""
    summary = opt_list(item, "summary", where) or []
    texts = [
        req_str(as_obj(s, f"{where}.summary[{j}]"), "text", f"{where}.summary[{j}]")
        for j, s in enumerate(summary)
    ]
    if not texts:
        content = opt_list(item, "content", where) or []
        texts = [
            req_str(as_obj(c, f"{where}.content[{j}]"), "text", f"{where}.content[{j}]")
            for j, c in enumerate(content)
        ]
    text = "\n\n".join(texts)
    extra = _strip(residual(item, ("type", "summary", "encrypted_content")), defaults)
    if summary != _summary(text):
        extra["summary"] = summary  # several parts, or none beside reasoning_text content
    return Reasoning(text, opt_str(item, "encrypted_content", where), extra)


def _summary(text: str) -> list[Json]:
    return [{"type": "summary_text", "text": text}] if text else []


def call_item(item: Json, where: str, defaults: Json) -> ToolCall:
    extra = _strip(residual(item, ("type", "call_id", "name", "arguments")), defaults)
    return ToolCall(
        req_str(item, "call_id", where),
        req_str(item, "name", where),
        req_str(item, "arguments", where),
        extra,
    )


def result_item(item: Json, where: str, tolerant: Tolerance = False) -> ToolResult:
    content = content_parts(item.get("output"), f"{where}.output", "input_text", tolerant)
    extra = residual(item, ("type", "call_id", "output"))
    return ToolResult(req_str(item, "call_id", where), tuple(content), extra=extra)


# --- rendering -----------------------------------------------------------------------


def render_content(parts: tuple[Any, ...], where: str, ctx: Ctx) -> str | list[Json]:
    """Input content: the plain string for one plain text, else an array of parts."""
    out: list[Json] = []
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        if isinstance(part, Text):
            out.append(render_text(part, at, ctx, "input_text"))
        elif isinstance(part, Image):
            detail = part.extra.get("detail") or "auto"
            base = {"type": "input_image", "image_url": image_url(part), "detail": detail}
            out.append(overlay(base, ctx.extras(part.extra, "part", at)))
        else:
            raise InvalidRequestError("messages hold only text and images", field=at)
    if len(out) == 1 and out[0].keys() == {"type", "text"} and out[0]["type"] == "input_text":
        return str(out[0]["text"])
    return out


def render_text(text: Text, where: str, ctx: Ctx, default_type: str) -> Json:
    kept = ctx.extras(text.extra, "part", where)
    kept.pop("item", None)
    kind = kept.get("type", default_type)
    if kind == "refusal":
        base: Json = {"type": kind, "refusal": text.text}
    else:
        base = {"type": kind, "text": text.text}
        if kind == "output_text":
            base["annotations"] = []
    return overlay(base, kept)


def render_result(part: Part, where: str, ctx: Ctx) -> Json:
    if not isinstance(part, ToolResult):
        raise InvalidRequestError("tool messages hold only tool results", field=where)
    output = render_content(part.content, f"{where}.content", ctx)
    base = {"type": "function_call_output", "call_id": part.call_id, "output": output or ""}
    if part.is_error:  # Responses has no such flag (the text says what failed)
        ctx.lacks("part", f"{where}.is_error", "is_error")
    return overlay(base, ctx.extras(part.extra, "part", where))


def render_assistant(
    parts: tuple[Part, ...], where: str, ctx: Ctx, ids: ItemIds | None
) -> list[Json]:
    """The items of an assistant turn; ``ids`` (output only) supplies default ids."""
    items: list[Json] = []
    after_text = False
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        defaults = ids(_KIND[type(part)], len(items)) if ids and type(part) in _KIND else {}
        if isinstance(part, Text):
            kept_item = ctx.extras(part.extra, "part", at).get("item", {}) if ctx.own else {}
            if after_text and not kept_item:
                items[-1]["content"].append(render_text(part, at, ctx, "output_text"))
                continue
            base = {"type": "message", **defaults, "role": "assistant", "content": []}
            items.append(overlay(base, kept_item))
            items[-1]["content"].append(render_text(part, at, ctx, "output_text"))
        elif isinstance(part, Reasoning):
            items.extend(_reasoning(part, at, ctx, defaults))
        elif isinstance(part, ToolCall):
            items.append(_call(part, at, ctx, defaults))
        else:
            raise InvalidRequestError("assistant messages hold no such part", field=at)
        after_text = isinstance(part, Text)
    return items


_KIND: dict[type, str] = {Text: "message", Reasoning: "reasoning", ToolCall: "function_call"}


def _call(call: ToolCall, where: str, ctx: Ctx, defaults: Json) -> Json:
    base = {"type": "function_call", **defaults, "call_id": call.id}
    base.update(name=call.name, arguments=call.arguments)
    return overlay(base, ctx.extras(call.extra, "part", where))


def _reasoning(part: Reasoning, where: str, ctx: Ctx, defaults: Json) -> list[Json]:
    kept = ctx.extras(part.extra, "part", where)
    if not ctx.own and part.signature:  # another provider's: opaque here
        ctx.lacks("part", f"{where}.signature", "signature")
    if not ctx.own and not part.text and (part.signature or part.extra):
        return []  # another dialect's opaque reasoning (redacted, signed)
    base: Json = {
        "type": "reasoning",
        **defaults,
        "summary": kept.pop("summary", _summary(part.text)),
    }
    if ctx.own and part.signature is not None:
        base["encrypted_content"] = part.signature
    return [overlay(base, kept)]
