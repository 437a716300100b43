"""Anthropic Messages response bodies to and from canonical responses.

Usage follows the convention of :mod:`rolltap.dialects.streams`: canonical
``input_tokens`` is the whole prompt, so parsing adds Anthropic's cache reads and
writes to its ``input_tokens`` and rendering takes them off again (the writes are
known only from this dialect's own ``extra["usage"]``).
"""

from __future__ import annotations

from dataclasses import replace

from rolltap.dialects import stops
from rolltap.dialects._shared import (
    Ctx,
    Json,
    as_obj,
    opt_int,
    opt_str,
    overlay,
    parts_origin,
    req_list,
    req_obj,
    req_str,
    residual,
)
from rolltap.dialects.canonical import Response, Usage
from rolltap.dialects.messages.parse import assistant_block
from rolltap.dialects.messages.render import assistant_blocks
from rolltap.errors import InvalidRequestError, UpstreamProtocolError

__all__ = ["parse_response_body", "render_response_body"]

NAME = "messages"

_STOP_IN, _STOP_OUT = stops.MESSAGES_IN, stops.MESSAGES_OUT
_DEFAULTS: Json = {"type": "message", "role": "assistant"}
_CONSUMED = ("id", "content", "model", "stop_reason", "stop_sequence", "usage")
_WRITES = "cache_creation_input_tokens"


def parse_response_body(body: Json) -> Response:
    """A Messages response as canonical; :class:`UpstreamProtocolError` when malformed."""
    try:
        return _parse(body)
    except InvalidRequestError as exc:
        raise UpstreamProtocolError(f"messages response: {exc.message}") from exc


def _parse(body: Json) -> Response:
    parts = []
    for j, raw in enumerate(req_list(body, "content", "")):
        block = as_obj(raw, f"content[{j}]")
        kind = req_str(block, "type", f"content[{j}]")
        parts.append(assistant_block(block, kind, f"content[{j}]"))
    extra = {
        k: v
        for k, v in residual(body, _CONSUMED).items()
        if k not in _DEFAULTS or _DEFAULTS[k] != v
    }
    raw_stop = body.get("stop_reason")
    stop = _STOP_IN.get(raw_stop) if isinstance(raw_stop, str) else None
    if stop is None and raw_stop is not None:
        extra["stop_reason"] = raw_stop  # e.g. pause_turn: no canonical reason
    usage, usage_rest = _usage(req_obj(body, "usage", ""))
    if usage_rest:
        extra["usage"] = usage_rest
    resp = Response(
        id=req_str(body, "id", ""),
        model=req_str(body, "model", ""),
        parts=tuple(parts),
        stop_reason=stop,
        usage=usage,
        stop_sequence=opt_str(body, "stop_sequence", ""),
        extra=extra,
    )
    return replace(resp, origin=parts_origin(parts, extra, NAME))


def _usage(raw: Json) -> tuple[Usage, Json]:
    uncached = opt_int(raw, "input_tokens", "usage") or 0
    reads = opt_int(raw, "cache_read_input_tokens", "usage")
    writes = opt_int(raw, _WRITES, "usage") or 0
    rest = residual(raw, ("input_tokens", "output_tokens", "cache_read_input_tokens"))
    if "cache_read_input_tokens" in raw and reads is None:
        rest["cache_read_input_tokens"] = None
    usage = Usage(
        input_tokens=uncached + (reads or 0) + writes,
        output_tokens=opt_int(raw, "output_tokens", "usage") or 0,
        cache_read_tokens=reads,
    )
    return usage, rest


def render_response_body(resp: Response) -> Json:
    """A Messages response for ``resp``. Tool-call arguments must be a JSON object
    (Anthropic's ``input``), else :class:`UpstreamProtocolError`; reasoning-token counts
    and other dialects' extras have no place and are left out."""
    ctx = Ctx(NAME, resp.origin, strict=False)
    try:
        content = assistant_blocks(resp.parts, "parts", ctx)
    except InvalidRequestError as exc:
        raise UpstreamProtocolError(f"messages response: {exc.message}") from exc
    body: Json = {"id": resp.id, **_DEFAULTS, "content": content, "model": resp.model}
    body["stop_reason"] = None if resp.stop_reason is None else _STOP_OUT[resp.stop_reason]
    body["stop_sequence"] = resp.stop_sequence
    body["usage"] = _usage_dict(resp, ctx.own)
    return overlay(body, resp.extra) if ctx.own else body


def _usage_dict(resp: Response, own: bool) -> Json:
    usage = resp.usage
    writes = 0
    if own and isinstance(resp.extra.get("usage"), dict):
        value = resp.extra["usage"].get(_WRITES)
        writes = value if isinstance(value, int) else 0
    out: Json = {
        "input_tokens": max(0, usage.input_tokens - (usage.cache_read_tokens or 0) - writes),
        "output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens is not None:
        out["cache_read_input_tokens"] = usage.cache_read_tokens
    return out
