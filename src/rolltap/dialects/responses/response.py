"""OpenAI Responses response bodies to and from canonical responses.

Stop reasons: ``completed`` is ``tool_use`` when the output holds a function call and
``end_turn`` otherwise; ``incomplete`` with ``max_output_tokens``/``content_filter`` is
``max_tokens``/``content_filter``. ``Response.extra`` holds whatever of the body the
rendering of the canonical fields alone does not reproduce (``created_at``, a
``failed`` status, ``reasoning``/``text`` settings, usage details...).
"""

from __future__ import annotations

from dataclasses import replace

from rolltap.dialects._shared import (
    Ctx,
    Json,
    UnsupportedError,
    as_obj,
    diff,
    overlay,
    parts_origin,
    req_list,
    req_str,
)
from rolltap.dialects.canonical import Reasoning, Response, StopReason, Text, ToolCall
from rolltap.dialects.chat.response import openai_usage, openai_usage_dict
from rolltap.dialects.responses.items import (
    NAME,
    ItemIds,
    call_item,
    message_texts,
    reasoning_item,
    render_assistant,
)
from rolltap.errors import InvalidRequestError, UpstreamProtocolError

__all__ = ["parse_response_body", "render_response_body"]

_INCOMPLETE: dict[str, StopReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}
_PREFIX = {"message": "msg", "reasoning": "rs", "function_call": "fc"}


def _ids(response_id: str) -> ItemIds:
    """Default ids for output items: unique within the response, stable across renders."""

    def ids(kind: str, index: int) -> Json:
        out: Json = {"id": f"{_PREFIX[kind]}_{response_id}_{index}"}
        if kind != "reasoning":
            out["status"] = "completed"
        return out

    return ids


def parse_response_body(body: Json) -> Response:
    """A Responses response as canonical; :class:`UpstreamProtocolError` when malformed."""
    try:
        return _parse(body)
    except InvalidRequestError as exc:
        raise UpstreamProtocolError(f"responses response: {exc.message}") from exc


def _parse(body: Json) -> Response:
    rid = req_str(body, "id", "")
    ids = _ids(rid)
    parts: list[Text | ToolCall | Reasoning] = []
    for k, raw in enumerate(req_list(body, "output", "")):
        where = f"output[{k}]"
        item = as_obj(raw, where)
        kind = req_str(item, "type", where)
        if kind == "message":
            parts.extend(message_texts(item, where, ids(kind, k)))
        elif kind == "reasoning":
            parts.append(reasoning_item(item, where, ids(kind, k)))
        elif kind == "function_call":
            parts.append(call_item(item, where, ids(kind, k)))
        else:
            raise UnsupportedError(
                f"output item {kind!r} has no canonical form", field=f"{where}.type"
            )
    core = Response(
        id=rid,
        model=req_str(body, "model", ""),
        parts=tuple(parts),
        stop_reason=_stop(body, parts),
        usage=openai_usage(body.get("usage"), "input_tokens", "output_tokens")[0],
    )
    core = replace(core, origin=parts_origin(parts, {}, NAME))
    rest = {k: v for k, v in body.items() if k not in ("id", "model", "output")}
    extra = diff(rest, render_response_body(core))
    return replace(core, extra=extra, origin=parts_origin(parts, extra, NAME))


def _stop(body: Json, parts: list[Text | ToolCall | Reasoning]) -> StopReason | None:
    status = body.get("status")
    if status == "completed":
        return "tool_use" if any(isinstance(p, ToolCall) for p in parts) else "end_turn"
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if status == "incomplete" and isinstance(reason, str):
        return _INCOMPLETE.get(reason)
    return None


def _status(stop: StopReason | None) -> tuple[str, Json | None]:
    if stop == "max_tokens":
        return "incomplete", {"reason": "max_output_tokens"}
    if stop == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    if stop is None:
        return "incomplete", None
    return "completed", None  # Responses has no stop sequences: they end the turn


def render_response_body(resp: Response) -> Json:
    """A Responses response for ``resp``. Counts it does not know (cached, reasoning,
    cache-write tokens) are written as 0, which the schema requires."""
    ctx = Ctx(NAME, resp.origin, strict=False)
    status, details = _status(resp.stop_reason)
    usage = openai_usage_dict(resp.usage, "input_tokens", "output_tokens", details=True)
    usage["input_tokens_details"]["cache_write_tokens"] = 0
    body: Json = {
        "id": resp.id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "incomplete_details": details,
        "model": resp.model,
        "output": render_assistant(resp.parts, "parts", ctx, _ids(resp.id)),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }
    return overlay(body, resp.extra) if ctx.own else body
