"""What a response event records of an answer: one shape whatever the dialects.

Response events keep the upstream's own body (its dialect named beside it) and lift
``usage`` (chat-shaped: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``)
and ``finish_reason`` (chat's names) to the top level, so whoever reads events, and
the gateway's own counters, see one shape whichever dialects were spoken. A stream is
folded as it passes into the body a non-streaming answer would have had: chat's
chunks by :class:`ChatStreamAccumulator` (the pass-through fast path, no canonical
model), every other stream's events by :class:`StreamFolder`.

A chat body passed through is summarized from the body itself (:func:`summarize_body`,
the upstream's ``usage`` as it came); every other answer from the canonical model
(:func:`summarize_canonical`, which adds ``stop_reason``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rolltap.clients.upstream import Answer
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockStart,
    BlockStop,
    Dialect,
    Reasoning,
    Response,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Text,
    ToolCall,
    Usage,
)
from rolltap.dialects.chat.response import openai_usage_dict
from rolltap.dialects.stops import CHAT_OUT

__all__ = [
    "ChatStreamAccumulator",
    "StreamFolder",
    "answer_recorded",
    "chat_stream_recorded",
    "folded_stream_recorded",
    "summarize_body",
    "summarize_canonical",
]


def answer_recorded(answer: Answer, canonical: Response | None) -> dict[str, Any]:
    """A whole answer's fields: its body, the summary (from ``canonical`` when given,
    else from the chat body) and whatever the upstream adds."""
    summary = summarize_body(answer.body) if canonical is None else summarize_canonical(canonical)
    return {"body": answer.body, **summary, **answer.record}


def chat_stream_recorded(acc: ChatStreamAccumulator) -> dict[str, Any]:
    """A chat stream passed through: the folded body, its summary, the chunk count."""
    body = acc.body()
    return {"body": body, **summarize_body(body), "chunks": acc.chunks}


def folded_stream_recorded(
    folder: StreamFolder, dialect: Dialect, extras: dict[str, Any]
) -> dict[str, Any]:
    """Any other stream: the folded answer as a ``dialect`` body, its summary, the event
    count, and the upstream's fields the canonical model has no place for."""
    resp = folder.response()
    out = {"body": dialect.response_from_canonical(resp), **summarize_canonical(resp)}
    out["chunks"] = folder.events
    if extras:
        out["extras"] = extras
    return out


def summarize_body(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a response body that a response event lifts to the top level: and
    ``reasoning``, when the server sent some (vLLM's ``reasoning_content`` or
    ``reasoning``, llama.cpp's ``reasoning_content``), so it is found beside the answer.

    >>> summarize_body({"choices": [{"message": {"reasoning": "hm"}, "finish_reason": "stop"}]})
    {'usage': None, 'finish_reason': 'stop', 'reasoning': 'hm'}
    """
    choices = body.get("choices")
    finish = reasoning = None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        finish = choices[0].get("finish_reason")
        message = choices[0].get("message")
        if isinstance(message, dict):
            reasoning = message.get("reasoning_content") or message.get("reasoning")
    out = {"usage": body.get("usage"), "finish_reason": finish}
    if isinstance(reasoning, str) and reasoning:
        out["reasoning"] = reasoning
    return out


@dataclass(slots=True)
class _Choice:
    role: str = "assistant"
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    logprobs: list[Any] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)

    def add(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if delta.get("role"):
            self.role = delta["role"]
        if delta.get("content"):
            self.content.append(delta["content"])
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(reasoning)
        for call in delta.get("tool_calls") or ():
            self._add_tool_call(call)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            self.logprobs.extend(logprobs["content"])
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            self.token_ids.extend(ids)

    def _add_tool_call(self, call: dict[str, Any]) -> None:
        index = call.get("index", len(self.tool_calls))
        slot = self.tool_calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if call.get("id"):
            slot["id"] = call["id"]
        fn = call.get("function") or {}
        if fn.get("name"):
            slot["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            slot["function"]["arguments"] += fn["arguments"]

    def to_dict(self, index: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": self.role, "content": "".join(self.content) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        out: dict[str, Any] = {
            "index": index,
            "message": message,
            "finish_reason": self.finish_reason,
        }
        if self.logprobs:
            out["logprobs"] = {"content": self.logprobs}
        if self.token_ids:
            out["token_ids"] = self.token_ids
        return out


@dataclass(slots=True)
class ChatStreamAccumulator:
    """Folds chat-completion chunks into a non-streaming-shaped body."""

    chunks: int = 0
    id: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    _choices: dict[int, _Choice] = field(default_factory=dict)

    def add(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        if self.id is None:
            self.id = chunk.get("id")
            self.model = chunk.get("model")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            index = choice.get("index", 0)
            slot = self._choices.get(index)
            if slot is None:
                slot = self._choices[index] = _Choice()
            slot.add(choice)

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [self._choices[i].to_dict(i) for i in sorted(self._choices)],
            "usage": self.usage,
        }


def summarize_canonical(resp: Response) -> dict[str, Any]:
    """The top-level fields of a response event, from a canonical answer.

    >>> summarize_canonical(Response("r", "m", (), "max_tokens", Usage(3, 4)))["usage"]
    {'prompt_tokens': 3, 'completion_tokens': 4, 'total_tokens': 7}
    """
    usage = openai_usage_dict(resp.usage, "prompt_tokens", "completion_tokens")
    out: dict[str, Any] = {
        "usage": usage,
        "finish_reason": None if resp.stop_reason is None else CHAT_OUT[resp.stop_reason],
        "stop_reason": resp.stop_reason,
    }
    reasoning = "".join(part.text for part in resp.parts if isinstance(part, Reasoning))
    if reasoning:
        out["reasoning"] = reasoning
    return out


@dataclass(slots=True)
class _Block:
    kind: str
    id: str | None
    name: str | None
    text: list[str] = field(default_factory=list)
    signature: str | None = None

    def part(self) -> Text | ToolCall | Reasoning:
        joined = "".join(self.text)
        if self.kind == "tool_call":
            return ToolCall(self.id or "", self.name or "", joined)
        if self.kind == "reasoning":
            return Reasoning(joined, self.signature)
        return Text(joined)


@dataclass(slots=True)
class StreamFolder:
    """Folds canonical stream events into the :class:`Response` they add up to."""

    id: str = ""
    model: str = ""
    events: int = 0
    _blocks: dict[int, _Block] = field(default_factory=dict)
    _end: StreamEnd | None = None
    _usage: Usage | None = None

    def add(self, events: list[StreamEvent]) -> None:
        for event in events:
            self.events += 1
            if isinstance(event, BlockDelta):
                self._blocks[event.index].text.append(event.text)
            elif isinstance(event, BlockStart):
                self._blocks[event.index] = _Block(event.kind, event.id, event.name)
            elif isinstance(event, BlockStop):
                if event.signature is not None:
                    self._blocks[event.index].signature = event.signature
            elif isinstance(event, StreamStart):
                self.id, self.model, self._usage = event.id, event.model, event.usage
            elif isinstance(event, StreamEnd):
                self._end = event

    def response(self) -> Response:
        end = self._end
        usage = end.usage if end is not None else (self._usage or Usage())
        return Response(
            id=self.id,
            model=self.model,
            parts=tuple(self._blocks[i].part() for i in sorted(self._blocks)),
            stop_reason=end.stop_reason if end is not None else None,
            usage=usage,
            stop_sequence=end.stop_sequence if end is not None else None,
        )
