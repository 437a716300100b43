"""``POST /v1/responses``: the OpenAI Responses wire format."""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.sim.config import SimConfig
from rolltap.sim.content import Answer, answer_for
from rolltap.sim.plan import CREATED, Dialect, Plan, fragments, hole, sse
from rolltap.sim.prefix import PromptTokens, conversation_tokens
from rolltap.sim.responses_in import prompt_for
from rolltap.sim.wire import error_response

__all__ = ["RESPONSES", "plan_for"]

_ID = hole("id")
_MESSAGE_ID = hole("item")
_FUNCTION_ID = hole("fc")
_CALL_ID = hole("call")


def _echo(body: dict[str, Any]) -> dict[str, Any]:
    """The request settings a Response object repeats back."""
    return {
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _status(answer: Answer, done: bool) -> str:
    if not done:
        return "in_progress"
    return "incomplete" if answer.stop == "max_tokens" else "completed"


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _item(answer: Answer, done: bool) -> dict[str, Any]:
    status = _status(answer, done)
    if answer.tool_name is not None:
        return {
            "id": _FUNCTION_ID,
            "type": "function_call",
            "status": status,
            "arguments": answer.tool_args if done else "",
            "call_id": _CALL_ID,
            "name": answer.tool_name,
        }
    return {
        "id": _MESSAGE_ID,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [_part(answer.text)] if done else [],
    }


def _response(answer: Answer, echo: dict[str, Any], done: bool) -> dict[str, Any]:
    status = _status(answer, done)
    usage = {
        "input_tokens": answer.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": answer.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }
    return {
        "id": _ID,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "model": answer.model,
        "output": [_item(answer, True)] if done else [],
        "usage": usage if done else None,
        **echo,
    }


class _Events:
    """The stream's events, each with the next ``sequence_number``."""

    def __init__(self) -> None:
        self.events: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": len(self.events), **fields}
        self.events.append(sse(payload, kind))


def _deltas(out: _Events, answer: Answer) -> int:
    """Add the item's content events; returns how many carry tokens."""
    at: dict[str, Any] = {"output_index": 0}
    if answer.tool_name is not None:
        at["item_id"] = _FUNCTION_ID
        pieces = fragments(answer.tool_args)
        for piece in pieces:
            out.add("response.function_call_arguments.delta", **at, delta=piece)
        args, name = answer.tool_args, answer.tool_name
        out.add("response.function_call_arguments.done", **at, arguments=args, name=name)
        return len(pieces)
    at |= {"item_id": _MESSAGE_ID, "content_index": 0}
    out.add("response.content_part.added", **at, part=_part(""))
    for token in answer.tokens:
        out.add("response.output_text.delta", **at, delta=token, logprobs=[])
    out.add("response.output_text.done", **at, text=answer.text, logprobs=[])
    out.add("response.content_part.done", **at, part=_part(answer.text))
    return len(answer.tokens)


def _stream(answer: Answer, echo: dict[str, Any]) -> Plan:
    out = _Events()
    out.add("response.created", response=_response(answer, echo, False))
    out.add("response.in_progress", response=_response(answer, echo, False))
    out.add("response.output_item.added", output_index=0, item=_item(answer, False))
    # A message's first token follows its content_part.added; a call's follows the item.
    first_token = len(out.events) + (0 if answer.tool_name is not None else 1)
    token_events = _deltas(out, answer)
    out.add("response.output_item.done", output_index=0, item=_item(answer, True))
    final = _response(answer, echo, True)
    out.add(f"response.{final['status']}", response=final)
    return Plan.streamed(out.events, first_token=first_token, token_events=token_events)


def plan_for(body: dict[str, Any], config: SimConfig) -> Plan:
    """Serialize the answer to a Responses request, stream or not."""
    answer = answer_for(prompt_for(body), config)
    if answer.stream:
        return _stream(answer, _echo(body))
    body_bytes = orjson.dumps(_response(answer, _echo(body), True))
    return Plan.whole(body_bytes, tokens=len(answer.tokens))


def _prompt_tokens(body: dict[str, Any], config: SimConfig) -> PromptTokens:
    prompt = prompt_for(body)
    return conversation_tokens(prompt, answer_for(prompt, config))


#: The Responses dialect, served at ``POST /v1/responses``.
RESPONSES = Dialect(
    name="responses",
    plan=plan_for,
    error=error_response,
    ids={"id": "resp_sim_", "item": "msg_sim_", "fc": "fc_sim_", "call": "call_sim_"},
    malformed_body=b'{"id": "resp_sim", "object": "response", "output": [{not json',
    malformed_event=b"event: response.output_text.delta\ndata: {not json\n\n",
    prompt_tokens=_prompt_tokens,
)
