"""Turning upstream answers into response-event payloads.

Streams are folded chunk by chunk into the same shape as a non-streaming body
(``choices[].message``, ``finish_reason``, ``logprobs``, ``usage``), so whoever reads the
events sees one shape whichever way the harness asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatStreamAccumulator", "summarize_body"]


def summarize_body(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a response body that a response event lifts to the top level."""
    choices = body.get("choices")
    finish = None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        finish = choices[0].get("finish_reason")
    return {"usage": body.get("usage"), "finish_reason": finish}


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
