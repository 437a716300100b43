"""``POST /v1/messages`` and ``/v1/messages/count_tokens``: the Anthropic Messages wire format."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from rolltap.sim.config import SimConfig
from rolltap.sim.content import Answer, answer_for
from rolltap.sim.messages_in import prompt_for
from rolltap.sim.plan import Dialect, Plan, fragments, hole, sse
from rolltap.sim.prefix import PromptTokens, conversation_tokens
from rolltap.sim.wire import error_headers

__all__ = ["COUNT_TOKENS", "MESSAGES", "error_response"]

_ID = hole("id")
_CALL = hole("call")
_STOP_REASONS = {
    "end": "end_turn",
    "max_tokens": "max_tokens",
    "tool_call": "tool_use",
    "stop_sequence": "stop_sequence",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_response(status: int, message: str, code: str, headers: dict[str, str]) -> web.Response:
    """An Anthropic-shaped error: ``{"type": "error", "error": {"type", "message"}}``.

    ``code`` (the OpenAI error code) has no place in this shape and is left out.
    """
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    body = orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    out = error_headers(status, headers)
    return web.Response(status=status, body=body, content_type="application/json", headers=out)


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    if answer.tool_name is not None:
        # The arguments are JSON that orjson wrote, so they embed as they are.
        arguments = orjson.Fragment(answer.tool_args.encode())
        return [{"type": "tool_use", "id": _CALL, "name": answer.tool_name, "input": arguments}]
    return [{"type": "text", "text": answer.text}] if answer.tokens else []


def _message(answer: Answer, content: list[Any], done: bool) -> dict[str, Any]:
    return {
        "id": _ID,
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": _STOP_REASONS[answer.stop] if done else None,
        "stop_sequence": answer.stop_sequence if done else None,
        "usage": {
            "input_tokens": answer.prompt_tokens,
            "output_tokens": answer.completion_tokens if done else 0,
        },
    }


def _block_events(answer: Answer) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The content block as started (empty), and its deltas."""
    if answer.tool_name is not None:
        start = {"type": "tool_use", "id": _CALL, "name": answer.tool_name, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": f} for f in fragments(answer.tool_args)
        ]
        return start, deltas
    deltas = [{"type": "text_delta", "text": token} for token in answer.tokens]
    return {"type": "text", "text": ""}, deltas


def _events(answer: Answer) -> Plan:
    events = [
        sse({"type": "message_start", "message": _message(answer, [], False)}, "message_start")
    ]
    start, deltas = _block_events(answer)
    has_block = answer.tool_name is not None or bool(answer.tokens)
    if has_block:
        block_start = {"type": "content_block_start", "index": 0, "content_block": start}
        events.append(sse(block_start, "content_block_start"))
    events.append(sse({"type": "ping"}, "ping"))
    first_token = len(events)
    for delta in deltas:
        payload = {"type": "content_block_delta", "index": 0, "delta": delta}
        events.append(sse(payload, "content_block_delta"))
    if has_block:
        events.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": _STOP_REASONS[answer.stop], "stop_sequence": answer.stop_sequence},
        "usage": {"output_tokens": answer.completion_tokens},
    }
    events.append(sse(message_delta, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return Plan.streamed(events, first_token=first_token, token_events=len(deltas))


def plan_for(body: dict[str, Any], config: SimConfig) -> Plan:
    """Serialize the answer to a Messages request, stream or not."""
    answer = answer_for(prompt_for(body), config)
    if answer.stream:
        return _events(answer)
    body_bytes = orjson.dumps(_message(answer, _blocks(answer), True))
    return Plan.whole(body_bytes, tokens=len(answer.tokens))


def count_tokens_plan(body: dict[str, Any], config: SimConfig) -> Plan:
    """``{"input_tokens": N}``, N as in a Messages answer's usage; no generation delay."""
    prompt = prompt_for(body, generating=False)
    return Plan.whole(orjson.dumps({"input_tokens": prompt.prompt_tokens}), latency=False)


def _prompt_tokens(body: dict[str, Any], config: SimConfig) -> PromptTokens:
    prompt = prompt_for(body)
    return conversation_tokens(prompt, answer_for(prompt, config))


#: The Anthropic Messages dialect, served at ``POST /v1/messages``.
MESSAGES = Dialect(
    name="messages",
    plan=plan_for,
    error=error_response,
    ids={"id": "msg_sim_", "call": "toolu_sim_"},
    malformed_body=b'{"id": "msg_sim", "type": "message", "content": [{not json',
    malformed_event=b"event: content_block_delta\ndata: {not json\n\n",
    prompt_tokens=_prompt_tokens,
)

#: Anthropic token counting, served at ``POST /v1/messages/count_tokens``.
COUNT_TOKENS = Dialect(
    name="count_tokens",
    plan=count_tokens_plan,
    error=error_response,
    ids={},
    malformed_body=b'{"input_tokens": {not json',
    malformed_event=b"",  # never streamed
)
