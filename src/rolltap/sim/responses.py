"""``POST /v1/responses``: the OpenAI Responses wire format.

With a weight version, every Response object's ``metadata`` (the request's, echoed) also
holds ``weight_version`` (the version when it was written). An aborted generation
(:mod:`rolltap.sim.weights`) answers what it had generated (the text so far; a tool call
whose arguments were streamed in part keeps that part) as an ``incomplete`` Response with
``incomplete_details.reason`` ``"abort"``; a stream closes its open content part and item
(``*.done`` events, status ``incomplete``) and ends with ``response.incomplete``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import orjson

from rolltap.sim.config import SimConfig
from rolltap.sim.content import Answer, answer_for, cut_short
from rolltap.sim.plan import (
    CREATED,
    VERSION,
    Dialect,
    Plan,
    Template,
    fragments,
    hole,
    sse,
    versioned,
)
from rolltap.sim.prefix import PromptTokens, conversation_tokens
from rolltap.sim.responses_in import prompt_for
from rolltap.sim.script import ScriptTurn, ToolCall
from rolltap.sim.wire import error_response

__all__ = ["RESPONSES", "plan_for"]

_ID = hole("id")
_MESSAGE_ID = hole("item")
_FUNCTION_ID = hole("fc")
_CALL_ID = hole("call")
#: ``incomplete_details.reason`` per way an answer ended early
_INCOMPLETE = {"max_tokens": "max_output_tokens", "abort": "abort"}


def _echo(body: dict[str, Any], version: bool) -> dict[str, Any]:
    """The request settings a Response object repeats back (and the weight version)."""
    metadata = body.get("metadata") or {}
    if version:
        metadata = {**metadata, "weight_version": VERSION}
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
        "metadata": metadata,
    }


def _status(answer: Answer, done: bool) -> str:
    if not done:
        return "in_progress"
    return "incomplete" if answer.stop in _INCOMPLETE else "completed"


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _call_item(answer: Answer, call: ToolCall, done: bool) -> dict[str, Any]:
    return {
        "id": _FUNCTION_ID if call.id is None else "fc_" + call.id,
        "type": "function_call",
        "status": _status(answer, done),
        "arguments": call.arguments if done else "",
        "call_id": _CALL_ID if call.id is None else "call_" + call.id,
        "name": call.name,
    }


def _message_item(answer: Answer, done: bool) -> dict[str, Any]:
    return {
        "id": _MESSAGE_ID,
        "type": "message",
        "status": _status(answer, done),
        "role": "assistant",
        "content": [_part(answer.text)] if done else [],
    }


def _has_message(answer: Answer) -> bool:
    """Whether the output holds a message: text, or nothing else to say."""
    return bool(answer.tokens) or not answer.calls


def _items(answer: Answer, done: bool) -> list[dict[str, Any]]:
    """The output items: the message (when there is text), then one per tool call."""
    items = [_message_item(answer, done)] if _has_message(answer) else []
    return items + [_call_item(answer, call, done) for call in answer.calls]


def _response(answer: Answer, echo: dict[str, Any], done: bool) -> dict[str, Any]:
    status = _status(answer, done)
    incomplete = {"reason": _INCOMPLETE[answer.stop]} if status == "incomplete" else None
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
        "incomplete_details": incomplete,
        "model": answer.model,
        "output": _items(answer, True) if done else [],
        "usage": usage if done else None,
        **echo,
    }


class _Events:
    """The stream's events, each with the next ``sequence_number``; where the deltas are."""

    def __init__(self, start: int = 0) -> None:
        #: the sequence number of the first event (a stream's tail goes on from its start)
        self.start = start
        self.events: list[bytes] = []
        #: the index of the first event carrying a token (-1: none yet), and past the last
        self.first_token = -1
        self.last_token = 0

    def add(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": self.start + len(self.events), **fields}
        self.events.append(sse(payload, kind))

    def delta(self, kind: str, **fields: Any) -> None:
        """Add an event carrying a token."""
        if self.first_token < 0:
            self.first_token = len(self.events)
        self.add(kind, **fields)
        self.last_token = len(self.events)


def _text_events(out: _Events, answer: Answer, at: dict[str, Any]) -> None:
    at = {**at, "item_id": _MESSAGE_ID, "content_index": 0}
    out.add("response.content_part.added", **at, part=_part(""))
    if out.first_token < 0 and not answer.tokens:
        out.first_token = out.last_token = len(out.events)  # where the first would be
    for token in answer.tokens:
        out.delta("response.output_text.delta", **at, delta=token, logprobs=[])
    out.add("response.output_text.done", **at, text=answer.text, logprobs=[])
    out.add("response.content_part.done", **at, part=_part(answer.text))


def _call_events(out: _Events, call: ToolCall, at: dict[str, Any]) -> None:
    at = {**at, "item_id": _FUNCTION_ID if call.id is None else "fc_" + call.id}
    if out.first_token < 0:
        out.first_token = out.last_token = len(out.events)
    for piece in fragments(call.arguments):
        out.delta("response.function_call_arguments.delta", **at, delta=piece)
    args, name = call.arguments, call.name
    out.add("response.function_call_arguments.done", **at, arguments=args, name=name)


def _stream(answer: Answer, echo: dict[str, Any]) -> Plan:
    out = _Events()
    out.add("response.created", response=_response(answer, echo, False))
    out.add("response.in_progress", response=_response(answer, echo, False))
    started, done = _items(answer, False), _items(answer, True)
    calls = iter(answer.calls)
    for index, (item, finished) in enumerate(zip(started, done, strict=True)):
        out.add("response.output_item.added", output_index=index, item=item)
        if item["type"] == "message":
            _text_events(out, answer, {"output_index": index})
        else:
            _call_events(out, next(calls), {"output_index": index})
        out.add("response.output_item.done", output_index=index, item=finished)
    final = _response(answer, echo, True)
    out.add(f"response.{final['status']}", response=final)
    token_events = out.last_token - out.first_token
    plan = Plan.streamed(out.events, first_token=out.first_token, token_events=token_events)
    return replace(plan, abort=partial(_tail, answer, echo, plan.events))


def _where(heads: list[bytes], kind: str) -> list[int]:
    """The indexes of the events of ``kind`` (``heads``: each event's bytes before a hole)."""
    name = b"event: " + kind.encode() + b"\n"
    return [i for i, head in enumerate(heads) if head.startswith(name)]


def _count(heads: list[bytes], kind: str) -> int:
    return len(_where(heads, kind))


def _tail(answer: Answer, echo: dict[str, Any], events: tuple[Template, ...], sent: int) -> Plan:
    """The end of a stream aborted after ``sent`` events: the open part and item closed with
    what they hold, then ``response.incomplete``."""
    heads = [event.parts[0] for event in events[:sent]]
    added = _count(heads, "response.output_item.added")
    done = _count(heads, "response.output_item.done")
    message = int(_has_message(answer))
    cut = cut_short(answer, _count(heads, "response.output_text.delta"))
    calls = answer.calls[: max(0, done - message)]
    out = _Events(start=sent)
    at: dict[str, Any] = {"output_index": added - 1}
    parts = _count(heads, "response.content_part.added")
    if added > done and added - 1 < message:  # the message is open
        if parts > _count(heads, "response.content_part.done"):
            part = {**at, "item_id": _MESSAGE_ID, "content_index": 0}
            out.add("response.output_text.done", **part, text=cut.text, logprobs=[])
            out.add("response.content_part.done", **part, part=_part(cut.text))
        out.add("response.output_item.done", **at, item=_message_item(cut, True))
    elif added > done:  # a call is open: its arguments so far
        call = answer.calls[added - 1 - message]
        opened = _where(heads, "response.output_item.added")[-1]
        streamed = _count(heads[opened:], "response.function_call_arguments.delta")
        call = replace(call, arguments="".join(fragments(call.arguments)[:streamed]))
        calls = (*calls, call)
        item_id = _FUNCTION_ID if call.id is None else "fc_" + call.id
        out.add("response.function_call_arguments.done", **at, item_id=item_id,
                arguments=call.arguments, name=call.name)  # fmt: skip
        out.add("response.output_item.done", **at, item=_call_item(cut, call, True))
    out.add("response.incomplete", response=_response(replace(cut, calls=calls), echo, True))
    return Plan.streamed(out.events, first_token=0, token_events=0)


def _cut(answer: Answer, echo: dict[str, Any], n: int) -> Plan:
    return Plan.whole(orjson.dumps(_response(cut_short(answer, n), echo, True)), tokens=n)


def plan_for(body: dict[str, Any], config: SimConfig, turn: ScriptTurn | None = None) -> Plan:
    """Serialize the answer to a Responses request (``turn``: the script's), stream or not."""
    answer = answer_for(prompt_for(body), config, turn)
    echo = _echo(body, versioned(config))
    if answer.stream:
        return _stream(answer, echo)
    body_bytes = orjson.dumps(_response(answer, echo, True))
    return Plan.whole(body_bytes, tokens=len(answer.tokens), abort=partial(_cut, answer, echo))


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
    plan_turn=plan_for,
)
