"""``POST /v1/messages`` and ``/v1/messages/count_tokens``: the Anthropic Messages wire format.

An aborted generation (:mod:`rolltap.sim.weights`) answers the text it had generated with
the stop reason ``pause_turn``, the Messages API's own for a turn cut off that the client
may send back to be continued; a stream closes its open block, then ends with that
``message_delta`` and ``message_stop``. Answers carry no weight version: the Messages
shape has no field for one.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import orjson
from aiohttp import web

from rolltap.sim.config import SimConfig
from rolltap.sim.content import Answer, answer_for, cut_short
from rolltap.sim.messages_in import prompt_for
from rolltap.sim.plan import Dialect, Plan, Template, fragments, hole, sse
from rolltap.sim.prefix import PromptTokens, conversation_tokens
from rolltap.sim.script import ScriptTurn, ToolCall
from rolltap.sim.wire import error_headers

__all__ = ["COUNT_TOKENS", "MESSAGES", "error_response"]

_ID = hole("id")
_CALL = hole("call")
_STOP_REASONS = {
    "end": "end_turn",
    "max_tokens": "max_tokens",
    "tool_call": "tool_use",
    "stop_sequence": "stop_sequence",
    "abort": "pause_turn",
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


def _call_id(call: ToolCall) -> Any:
    return _CALL if call.id is None else "toolu_" + call.id


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.tokens else []
    for call in answer.calls:
        # The arguments are JSON that orjson wrote, so they embed as they are.
        arguments = orjson.Fragment(call.arguments.encode())
        blocks.append({"type": "tool_use", "id": _call_id(call), "name": call.name,
                       "input": arguments})  # fmt: skip
    return blocks


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


def _block_events(answer: Answer) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each content block as started (empty), with its deltas: the text, then each call."""
    blocks = []
    if answer.tokens:
        deltas = [{"type": "text_delta", "text": token} for token in answer.tokens]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call in answer.calls:
        start = {"type": "tool_use", "id": _call_id(call), "name": call.name, "input": {}}
        pieces = fragments(call.arguments)
        blocks.append((start, [{"type": "input_json_delta", "partial_json": f} for f in pieces]))
    return blocks


def _events(answer: Answer) -> Plan:
    events = [
        sse({"type": "message_start", "message": _message(answer, [], False)}, "message_start")
    ]
    first_token = last_token = 0
    for index, (start, deltas) in enumerate(_block_events(answer)):
        block_start = {"type": "content_block_start", "index": index, "content_block": start}
        events.append(sse(block_start, "content_block_start"))
        if index == 0:
            events.append(sse({"type": "ping"}, "ping"))
            first_token = len(events)
        for delta in deltas:
            payload = {"type": "content_block_delta", "index": index, "delta": delta}
            events.append(sse(payload, "content_block_delta"))
        last_token = len(events)
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    if len(events) == 1:  # no block: an empty answer
        events.append(sse({"type": "ping"}, "ping"))
        first_token = last_token = len(events)
    events += _ending(answer)
    plan = Plan.streamed(events, first_token=first_token, token_events=last_token - first_token)
    return replace(plan, abort=partial(_tail, answer, plan.events))


def _ending(answer: Answer) -> list[bytes]:
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": _STOP_REASONS[answer.stop], "stop_sequence": answer.stop_sequence},
        "usage": {"output_tokens": answer.completion_tokens},
    }
    return [sse(message_delta, "message_delta"), sse({"type": "message_stop"}, "message_stop")]


def _tail(answer: Answer, events: tuple[Template, ...], sent: int) -> Plan:
    """The end of a stream aborted after ``sent`` events: the open block's stop, then the
    ``pause_turn`` ending."""
    heads = [event.parts[0] for event in events[:sent]]
    started = sum(head.startswith(b"event: content_block_start") for head in heads)
    stopped = sum(head.startswith(b"event: content_block_stop") for head in heads)
    deltas = sum(head.startswith(b"event: content_block_delta") for head in heads)
    out = []
    if started > stopped:
        out.append(sse({"type": "content_block_stop", "index": started - 1}, "content_block_stop"))
    out += _ending(cut_short(answer, deltas))
    return Plan.streamed(out, first_token=0, token_events=0)


def _cut(answer: Answer, n: int) -> Plan:
    cut = cut_short(answer, n)
    return Plan.whole(orjson.dumps(_message(cut, _blocks(cut), True)), tokens=n)


def plan_for(body: dict[str, Any], config: SimConfig, turn: ScriptTurn | None = None) -> Plan:
    """Serialize the answer to a Messages request (``turn``: the script's), stream or not."""
    answer = answer_for(prompt_for(body), config, turn)
    if answer.stream:
        return _events(answer)
    body_bytes = orjson.dumps(_message(answer, _blocks(answer), True))
    return Plan.whole(body_bytes, tokens=len(answer.tokens), abort=partial(_cut, answer))


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
    plan_turn=plan_for,
)

#: Anthropic token counting, served at ``POST /v1/messages/count_tokens``.
COUNT_TOKENS = Dialect(
    name="count_tokens",
    plan=count_tokens_plan,
    error=error_response,
    ids={},
    malformed_body=b'{"input_tokens": {not json',
    malformed_event=b"",  # never streamed
    generates=False,
)
