"""Chat-completions response bodies to and from canonical responses.

``Response.extra`` mirrors the body: top-level fields beyond the canonical ones
(``created``, ``system_fingerprint``, vLLM's ``prompt_token_ids``/``prompt_logprobs``,
llama.cpp's ``timings``), ``extra["choices"][0]`` the first choice's (``logprobs``,
vLLM's ``token_ids``, its message's ``refusal``...), further choices whole, and
``extra["usage"]`` the usage fields beyond the canonical counts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rolltap.dialects import stops
from rolltap.dialects._shared import (
    Ctx,
    Json,
    as_obj,
    opt_int,
    opt_obj,
    overlay,
    parts_origin,
    req_list,
    req_str,
    residual,
)
from rolltap.dialects.canonical import Reasoning, Response, StopReason, Text, ToolCall, Usage
from rolltap.dialects.chat.parse import assistant_parts
from rolltap.dialects.chat.render import render_call
from rolltap.errors import InvalidRequestError, UpstreamProtocolError

__all__ = ["openai_usage", "openai_usage_dict", "parse_response_body", "render_response_body"]

NAME = "chat"

_STOP_IN, _STOP_OUT = stops.CHAT_IN, stops.CHAT_OUT
# what the renderer writes when the canonical response says nothing about them
_DEFAULTS: Json = {"object": "chat.completion", "created": 0}


def parse_response_body(body: Json) -> Response:
    """A chat completion as canonical; :class:`UpstreamProtocolError` when malformed."""
    try:
        return _parse(body)
    except InvalidRequestError as exc:
        raise UpstreamProtocolError(f"chat response: {exc.message}") from exc


def _parse(body: Json) -> Response:
    choices = req_list(body, "choices", "")
    first = as_obj(choices[0], "choices[0]") if choices else {}
    message = opt_obj(first, "message", "choices[0]") or {}
    parts, msg_rest = assistant_parts(message, "choices[0].message")
    stop, seq, choice_rest = _finish(first)
    if msg_rest:
        choice_rest["message"] = msg_rest
    usage, usage_rest = openai_usage(body.get("usage"), "prompt_tokens", "completion_tokens")
    extra = {
        k: v
        for k, v in residual(body, ("id", "model", "choices", "usage")).items()
        if k not in _DEFAULTS or _DEFAULTS[k] != v
    }
    if choice_rest or len(choices) > 1:
        extra["choices"] = [choice_rest, *choices[1:]]
    if usage_rest:
        extra["usage"] = usage_rest
    resp = Response(
        id=req_str(body, "id", ""),
        model=req_str(body, "model", ""),
        parts=tuple(parts),
        stop_reason=stop,
        usage=usage,
        stop_sequence=seq,
        extra=extra,
    )
    return replace(resp, origin=parts_origin(parts, extra, NAME))


def _finish(choice: Json) -> tuple[StopReason | None, str | None, Json]:
    rest = residual(choice, ("index", "message", "finish_reason"))
    if choice.get("index", 0) != 0:
        rest["index"] = choice["index"]
    if "logprobs" in rest and rest["logprobs"] is None:
        del rest["logprobs"]  # the renderer writes null
    raw = choice.get("finish_reason")
    stop = _STOP_IN.get(raw) if isinstance(raw, str) else None
    if stop is None and raw is not None:
        rest["finish_reason"] = raw  # e.g. vLLM's "abort": no canonical reason
    if stop == "end_turn" and isinstance(rest.get("stop_reason"), str):
        return "stop_sequence", rest.pop("stop_reason"), rest  # vLLM names the stop string
    return stop, None, rest


def openai_usage(raw: object, inp: str, out: str) -> tuple[Usage, Json]:
    """Usage from an OpenAI usage object (chat: prompt/completion, Responses:
    input/output), and the fields of it left over."""
    if not isinstance(raw, dict):
        return Usage(), {}
    usage = Usage(opt_int(raw, inp, "usage") or 0, opt_int(raw, out, "usage") or 0)
    rest = residual(raw, (inp, out, "total_tokens", _details(inp), _details(out)))
    if "total_tokens" in raw and raw["total_tokens"] != usage.input_tokens + usage.output_tokens:
        rest["total_tokens"] = raw["total_tokens"]
    cached = _detail(raw, _details(inp), "cached_tokens", rest)
    reasoning = _detail(raw, _details(out), "reasoning_tokens", rest)
    return replace(usage, cache_read_tokens=cached, reasoning_tokens=reasoning), rest


def _details(key: str) -> str:
    return key.removesuffix("_tokens") + "_tokens_details"


def _detail(raw: Json, key: str, sub: str, rest: Json) -> int | None:
    if key not in raw:
        return None
    details = raw[key]
    if not isinstance(details, dict):
        rest[key] = details
        return None
    value = opt_int(details, sub, f"usage.{key}")
    left = residual(details, (sub,) if value is not None else ())
    if left or value is None:
        rest[key] = left
    return value


def openai_usage_dict(usage: Usage, inp: str, out: str, *, details: bool = False) -> Json:
    """The OpenAI usage object for ``usage``; ``details`` writes both details objects
    even when the counts are unknown (Responses requires them)."""
    body: Json = {
        inp: usage.input_tokens,
        out: usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_tokens is not None or details:
        body[_details(inp)] = {"cached_tokens": usage.cache_read_tokens or 0}
    if usage.reasoning_tokens is not None or details:
        body[_details(out)] = {"reasoning_tokens": usage.reasoning_tokens or 0}
    return body


def render_response_body(resp: Response) -> Json:
    """A chat completion for ``resp``. Chat has one text and one reasoning slot, so
    several are concatenated; extras of another dialect are left out."""
    ctx = Ctx(NAME, resp.origin, strict=False)
    msg: Json = {"role": "assistant", "content": _joined(resp.parts, Text)}
    reasoning = [p for p in resp.parts if isinstance(p, Reasoning) and _speaks(p, ctx)]
    if reasoning:
        fields = reasoning[0].extra.get("fields", ["reasoning_content"]) if ctx.own else []
        for key in fields or ["reasoning_content"]:
            msg[key] = "".join(p.text for p in reasoning)
    calls = [p for p in resp.parts if isinstance(p, ToolCall)]
    if calls:
        msg["tool_calls"] = [render_call(c, f"parts[{j}]", ctx) for j, c in enumerate(calls)]
    choice: Json = {"index": 0, "message": msg, "logprobs": None}
    choice["finish_reason"] = None if resp.stop_reason is None else _STOP_OUT[resp.stop_reason]
    if resp.stop_reason == "stop_sequence" and resp.stop_sequence is not None:
        choice["stop_reason"] = resp.stop_sequence
    body: Json = {"id": resp.id, **_DEFAULTS, "model": resp.model, "choices": [choice]}
    body["usage"] = openai_usage_dict(resp.usage, "prompt_tokens", "completion_tokens")
    return _restore(body, resp.extra) if ctx.own else body


def _restore(body: Json, extra: Json) -> Json:
    """``body`` with this dialect's extras back: the first choice's merged into the
    rendered one, further choices appended whole."""
    choices = extra.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return overlay(body, extra)
    out = overlay(body, {k: v for k, v in extra.items() if k != "choices"})
    out["choices"] = [overlay(body["choices"][0], choices[0]), *choices[1:]]
    return out


def _joined(parts: tuple[Any, ...], kind: type[Text]) -> str | None:
    texts = [p.text for p in parts if isinstance(p, kind)]
    return "".join(texts) if texts else None


def _speaks(part: Reasoning, ctx: Ctx) -> bool:
    """False for another dialect's opaque reasoning (no text, only a signature)."""
    return ctx.own or bool(part.text) or not (part.signature or part.extra)
