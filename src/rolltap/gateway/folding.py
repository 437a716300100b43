"""Canonical answers for the recorder: streams folded, usage and stop in one shape.

Response events keep the upstream's own body (its dialect named beside it) and lift
``usage`` (chat-shaped: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``)
and ``finish_reason`` (chat's names) to the top level, so whoever reads events, and
the gateway's own counters, see one shape whichever dialects were spoken.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rolltap.dialects._chat_response import openai_usage_dict
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockStart,
    BlockStop,
    Reasoning,
    Response,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Text,
    ToolCall,
    Usage,
)
from rolltap.dialects.stops import CHAT_OUT

__all__ = ["StreamFolder", "events_of", "summarize_canonical"]


def summarize_canonical(resp: Response) -> dict[str, Any]:
    """The top-level fields of a response event, from a canonical answer.

    >>> summarize_canonical(Response("r", "m", (), "max_tokens", Usage(3, 4)))["usage"]
    {'prompt_tokens': 3, 'completion_tokens': 4, 'total_tokens': 7}
    """
    usage = openai_usage_dict(resp.usage, "prompt_tokens", "completion_tokens")
    return {
        "usage": usage,
        "finish_reason": None if resp.stop_reason is None else CHAT_OUT[resp.stop_reason],
        "stop_reason": resp.stop_reason,
    }


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


def events_of(resp: Response) -> list[StreamEvent]:
    """The stream events a complete answer unfolds into (one delta per block).

    >>> [type(e).__name__ for e in events_of(Response("r", "m", (Text("hi"),), None, Usage()))]
    ['StreamStart', 'BlockStart', 'BlockDelta', 'BlockStop', 'StreamEnd']
    """
    events: list[StreamEvent] = [StreamStart(resp.id, resp.model, Usage(resp.usage.input_tokens))]
    for index, part in enumerate(resp.parts):
        if isinstance(part, ToolCall):
            events.append(BlockStart(index, "tool_call", id=part.id, name=part.name))
            events.append(BlockDelta(index, part.arguments))
            events.append(BlockStop(index))
        elif isinstance(part, Reasoning):
            events += [BlockStart(index, "reasoning"), BlockDelta(index, part.text),
                       BlockStop(index, part.signature)]  # fmt: skip
        else:
            events += [BlockStart(index, "text"), BlockDelta(index, part.text), BlockStop(index)]
    events.append(StreamEnd(resp.stop_reason, resp.usage, resp.stop_sequence))
    return events
