"""OpenAI Responses streams, upstream side: ``response.*`` events to canonical events.

Blocks map to output items: a function call item is one tool_call block, a reasoning
item is one reasoning block (its summary parts joined by a blank line, opened lazily
so an item with no visible text and no ``encrypted_content`` makes no block), and
each text (or refusal) part of a message item is one text block.
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects._stream_shared import (
    dict_field,
    int_field,
    load_object,
    openai_usage,
    str_field,
    stream_error,
)
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    StopReason,
    StreamEnd,
    StreamEvent,
    StreamStart,
)
from rolltap.dialects.sse import SSEEvent
from rolltap.errors import UpstreamProtocolError

__all__ = ["ResponsesStreamParser"]

_INCOMPLETE: dict[str, StopReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}
_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)
_REASONING_DONES = frozenset(
    {"response.reasoning_summary_text.done", "response.reasoning_text.done"}
)


class ResponsesStreamParser:
    """Responses stream events in, canonical stream events out."""

    __slots__ = (
        "_blocks",
        "_done",
        "_extras",
        "_fed",
        "_items",
        "_open",
        "_parts",
        "_sep",
        "_tools",
    )

    def __init__(self) -> None:
        self._done = False
        self._blocks = 0
        self._items: dict[int, str] = {}  # output_index -> item type, while open
        self._parts: dict[tuple[int, int], int] = {}  # (output, content index) -> text block
        self._open: dict[int, int] = {}  # output_index -> its tool_call/reasoning block
        self._fed: set[int] = set()  # blocks that got a delta (so .done adds nothing)
        self._sep: set[int] = set()  # reasoning blocks whose next delta starts a new part
        self._tools = 0
        self._extras: dict[str, Any] = {}

    @property
    def done(self) -> bool:
        """True once ``response.completed`` or ``response.incomplete`` has been seen."""
        return self._done

    @property
    def extras(self) -> dict[str, Any]:
        """What has no canonical event: ``logprobs`` (of every text delta, concatenated),
        ``items`` (output items of other types, e.g. ``web_search_call``, as done),
        ``annotations``, ``response`` (the final response object)."""
        return self._extras

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """One upstream SSE event in; the canonical events it completes out."""
        if event.data is None:
            return []
        if self._done:
            raise UpstreamProtocolError("responses stream: event after the response ended")
        obj = load_object(event.data, "responses")
        kind = obj.get("type")
        if kind in _TEXT_DELTAS:
            return self._text_delta(obj)
        if kind == "response.function_call_arguments.delta":
            index = self._block(obj, "function_call_arguments.delta")
            self._fed.add(index)
            text = str_field(obj, "delta", str(kind))
            return [BlockDelta(index, text)] if text else []
        if kind in _REASONING_DELTAS:
            return self._reasoning_text(obj, str_field(obj, "delta", str(kind)), done=False)
        if kind == "response.content_part.added":
            return self._part_added(obj)
        if kind == "response.output_item.added":
            return self._item_added(obj)
        return self._other(obj, str(kind))

    def eof(self) -> list[StreamEvent]:
        """The upstream closed the stream; an error unless the response had ended."""
        if not self._done:
            raise UpstreamProtocolError("responses stream ended before response.completed")
        return []

    def _other(self, obj: dict[str, Any], kind: str) -> list[StreamEvent]:
        if kind in ("response.output_text.done", "response.refusal.done"):
            key = (int_field(obj, "output_index", kind), int_field(obj, "content_index", kind))
            index = self._parts.get(key)
            text = obj.get("text" if kind == "response.output_text.done" else "refusal")
            if index is None or index in self._fed or not isinstance(text, str) or not text:
                return []
            self._fed.add(index)
            return [BlockDelta(index, text)]
        if kind == "response.content_part.done":
            key = (int_field(obj, "output_index", kind), int_field(obj, "content_index", kind))
            index = self._parts.pop(key, None)
            return [] if index is None else [BlockStop(index)]
        if kind == "response.function_call_arguments.done":
            index = self._block(obj, kind)
            arguments = obj.get("arguments")
            if index in self._fed or not isinstance(arguments, str) or not arguments:
                return []
            self._fed.add(index)
            return [BlockDelta(index, arguments)]
        if kind in _REASONING_DONES:
            text = obj.get("text")
            return self._reasoning_text(obj, text if isinstance(text, str) else "", done=True)
        if kind == "response.reasoning_summary_part.added":
            index = self._open.get(int_field(obj, "output_index", kind))
            if index is not None and index in self._fed:
                self._sep.add(index)
            return []
        if kind == "response.output_item.done":
            return self._item_done(obj)
        if kind == "response.created":
            response = dict_field(obj, "response", kind)
            ident = str_field(response, "id", "response.created.response")
            return [StreamStart(ident, str(response.get("model") or ""))]
        if kind in ("response.completed", "response.incomplete"):
            return self._finish(dict_field(obj, "response", kind))
        if kind == "response.failed":
            response = dict_field(obj, "response", kind)
            raise stream_error("responses", response.get("error") or {"message": "failed"})
        if kind == "error":
            raise stream_error("responses", obj.get("error") or obj)
        if kind == "response.output_text.annotation.added":
            self._extras.setdefault("annotations", []).append(obj.get("annotation"))
        return []  # in_progress, *.part.done and event types added after this was written

    def _block(self, obj: dict[str, Any], where: str) -> int:
        index = self._open.get(int_field(obj, "output_index", where))
        if index is None:
            raise UpstreamProtocolError(f"responses stream: {where} for no open output item")
        return index

    def _new(
        self,
        kind: BlockKind,
        out: list[StreamEvent],
        ident: str | None = None,
        name: str | None = None,
    ) -> int:
        index = self._blocks
        self._blocks += 1
        out.append(BlockStart(index, kind, ident, name))
        return index

    def _item_added(self, obj: dict[str, Any]) -> list[StreamEvent]:
        position = int_field(obj, "output_index", "output_item.added")
        item = dict_field(obj, "item", "output_item.added")
        kind = str(item.get("type"))
        self._items[position] = kind
        out: list[StreamEvent] = []
        if kind == "function_call":
            where = "output_item.added.item"
            ident, name = str_field(item, "call_id", where), str_field(item, "name", where)
            index = self._open[position] = self._new("tool_call", out, ident, name)
            self._tools += 1
            if isinstance(item.get("arguments"), str) and item["arguments"]:
                self._fed.add(index)
                out.append(BlockDelta(index, item["arguments"]))
        return out

    def _part_added(self, obj: dict[str, Any]) -> list[StreamEvent]:
        where = "content_part.added"
        key = (int_field(obj, "output_index", where), int_field(obj, "content_index", where))
        part = dict_field(obj, "part", where)
        if key[0] not in self._items:
            raise UpstreamProtocolError(f"responses stream: {where} for no open output item")
        if part.get("type") not in ("output_text", "refusal"):
            return []  # e.g. reasoning_text parts: their deltas go to the reasoning block
        out: list[StreamEvent] = []
        index = self._parts[key] = self._new("text", out)
        initial = part.get("text") or part.get("refusal")
        if isinstance(initial, str) and initial:
            self._fed.add(index)
            out.append(BlockDelta(index, initial))
        return out

    def _text_delta(self, obj: dict[str, Any]) -> list[StreamEvent]:
        where = str(obj.get("type"))
        key = (int_field(obj, "output_index", where), int_field(obj, "content_index", where))
        index = self._parts.get(key)
        if index is None:
            raise UpstreamProtocolError(f"responses stream: {where} for no open content part")
        logprobs = obj.get("logprobs")
        if logprobs and isinstance(logprobs, list):
            self._extras.setdefault("logprobs", []).extend(logprobs)
        text = str_field(obj, "delta", where)
        if not text:
            return []
        self._fed.add(index)
        return [BlockDelta(index, text)]

    def _reasoning_text(self, obj: dict[str, Any], text: str, *, done: bool) -> list[StreamEvent]:
        where = str(obj.get("type"))
        position = int_field(obj, "output_index", where)
        if self._items.get(position) != "reasoning":
            raise UpstreamProtocolError(f"responses stream: {where} for no open reasoning item")
        out: list[StreamEvent] = []
        index = self._open.get(position)
        if index is None:
            index = self._open[position] = self._new("reasoning", out)
        elif done and index in self._fed:
            return []  # the deltas already carried this text
        if text:
            if index in self._sep:
                self._sep.discard(index)
                text = "\n\n" + text  # a new summary part
            self._fed.add(index)
            out.append(BlockDelta(index, text))
        return out

    def _item_done(self, obj: dict[str, Any]) -> list[StreamEvent]:
        position = int_field(obj, "output_index", "output_item.done")
        item = dict_field(obj, "item", "output_item.done")
        kind = self._items.pop(position, None)
        out: list[StreamEvent] = []
        index = self._open.pop(position, None)
        if kind == "function_call" and index is not None:
            arguments = item.get("arguments")
            if index not in self._fed and isinstance(arguments, str) and arguments:
                out.append(BlockDelta(index, arguments))
            out.append(BlockStop(index))
        elif kind == "reasoning":
            signature = item.get("encrypted_content")
            signature = signature if isinstance(signature, str) and signature else None
            if index is None and signature is not None:
                index = self._new("reasoning", out)
            if index is not None:
                out.append(BlockStop(index, signature))
        elif kind == "message":
            for key in [key for key in self._parts if key[0] == position]:
                out.append(BlockStop(self._parts.pop(key)))
        else:
            self._extras.setdefault("items", []).append(item)
        return out

    def _finish(self, response: dict[str, Any]) -> list[StreamEvent]:
        still_open = sorted([*self._open.values(), *self._parts.values()])
        out: list[StreamEvent] = [BlockStop(index) for index in still_open]
        self._open.clear()
        self._parts.clear()
        self._done = True
        stop: StopReason | None = "tool_use" if self._tools else "end_turn"
        if response.get("status") == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            stop = _INCOMPLETE.get(reason) if isinstance(reason, str) else None
        self._extras["response"] = response
        usage = openai_usage(response.get("usage"), "input_tokens", "output_tokens")
        out.append(StreamEnd(stop, usage))
        return out
