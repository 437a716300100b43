"""Wire bytes for an :class:`Answer`, rendered once and reused.

A request's answer is serialized to :class:`Template` s whose only per-request holes are the
completion id, the tool-call id and ``created``. The holes are raw ``\\x00``-delimited
``orjson.Fragment`` s: orjson escapes every control character inside strings, so no value a
client sends can forge one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rolltap.sim.content import Answer

__all__ = ["DONE_EVENT", "MALFORMED_BODY", "MALFORMED_EVENT", "Plan", "Template", "plan_for"]

_ID = orjson.Fragment(b"\x00id\x00")
_CREATED = orjson.Fragment(b"\x00created\x00")
_CALL = orjson.Fragment(b"\x00call\x00")

DONE_EVENT = b"data: [DONE]\n\n"
MALFORMED_EVENT = b"data: {not json\n\n"
MALFORMED_BODY = b'{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{not json'


@dataclass(frozen=True, slots=True)
class Template:
    """Bytes with named holes; odd-indexed ``parts`` are hole names."""

    parts: tuple[bytes, ...]

    @classmethod
    def of(cls, data: bytes) -> Template:
        """Split serialized bytes at their holes."""
        return cls(tuple(data.split(b"\x00")))

    def render(self, holes: Mapping[bytes, bytes]) -> bytes:
        """The bytes with every hole filled from ``holes``."""
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        out = list(parts)
        for i in range(1, len(out), 2):
            out[i] = holes[out[i]]
        return b"".join(out)


def holes_for(request_number: int, created: int) -> dict[bytes, bytes]:
    """Hole values for one request."""
    n = str(request_number).encode()
    return {
        b"id": b'"chatcmpl-sim-' + n + b'"',
        b"call": b'"call_sim_' + n + b'"',
        b"created": str(created).encode(),
    }


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything needed to answer one request body, stream or not."""

    answer: Answer
    #: the non-stream JSON body (empty for a stream)
    body: Template
    #: the SSE events in order, ending with ``data: [DONE]`` (empty when not streaming)
    events: tuple[Template, ...]
    #: all events joined, for the unpaced fast path
    joined: Template
    #: how many leading events carry tokens (these are paced at tokens_per_s)
    token_events: int

    @property
    def nbytes(self) -> int:
        """Approximate memory held by the rendered bytes (for bounding caches)."""
        rendered = (self.body, self.joined, *self.events)
        return sum(len(part) for template in rendered for part in template.parts)


def _logprob_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}


def _logprobs(answer: Answer, start: int, stop: int) -> dict[str, Any] | None:
    if answer.logprobs is None:
        return None
    pairs = zip(answer.tokens[start:stop], answer.logprobs[start:stop], strict=True)
    return {"content": [_logprob_entry(t, lp) for t, lp in pairs]}


def _tool_call(answer: Answer, arguments: str) -> dict[str, Any]:
    return {
        "id": _CALL,
        "type": "function",
        "function": {"name": answer.tool_name, "arguments": arguments},
    }


def _body(answer: Answer) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(answer.tokens)}
    if answer.tool_name is not None:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [_tool_call(answer, answer.tool_args)],
        }
    choice = {
        "index": 0,
        "message": message,
        "logprobs": _logprobs(answer, 0, len(answer.tokens)),
        "finish_reason": answer.finish_reason,
    }
    return orjson.dumps(
        {
            "id": _ID,
            "object": "chat.completion",
            "created": _CREATED,
            "model": answer.model,
            "choices": [choice],
            "usage": answer.usage,
        }
    )


def _event(answer: Answer, choices: list[Any], usage: dict[str, int] | None = None) -> bytes:
    chunk: dict[str, Any] = {
        "id": _ID,
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": answer.model,
        "choices": choices,
    }
    if answer.include_usage:
        chunk["usage"] = usage
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _delta(
    answer: Answer, delta: dict[str, Any], lp: Any = None, finish: str | None = None
) -> bytes:
    return _event(answer, [{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}])


def _fragments(text: str, count: int = 3) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _token_events(answer: Answer) -> list[bytes]:
    if answer.tool_name is not None:
        first = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"index": 0, **_tool_call(answer, "")}],
        }
        events = [_delta(answer, first)]
        for fragment in _fragments(answer.tool_args):
            call = {"index": 0, "function": {"arguments": fragment}}
            events.append(_delta(answer, {"tool_calls": [call]}))
        return events
    if not answer.tokens:
        return [_delta(answer, {"role": "assistant", "content": ""})]
    events = []
    for i, token in enumerate(answer.tokens):
        delta = {"role": "assistant", "content": token} if i == 0 else {"content": token}
        events.append(_delta(answer, delta, _logprobs(answer, i, i + 1)))
    return events


def plan_for(answer: Answer) -> Plan:
    """Serialize ``answer`` for the wire shape the request asked for."""
    if not answer.stream:
        empty = Template((b"",))
        return Plan(
            answer=answer, body=Template.of(_body(answer)), events=(), joined=empty, token_events=0
        )
    events = _token_events(answer)
    token_events = len(events)
    events.append(_delta(answer, {}, finish=answer.finish_reason))
    if answer.include_usage:
        events.append(_event(answer, [], answer.usage))
    events.append(DONE_EVENT)
    return Plan(
        answer=answer,
        body=Template((b"",)),
        events=tuple(Template.of(e) for e in events),
        joined=Template.of(b"".join(events)),
        token_events=token_events,
    )
