"""Anthropic Messages streams, upstream side: ``message_start`` … ``message_stop`` to canonical.

The wire format already has explicit, indexed blocks, so both directions are close to
one-to-one; what needs state is the usage (input tokens arrive at ``message_start``,
output tokens at ``message_delta``) and a thinking block's signature, which arrives as
its own delta just before the block stops.
"""

from __future__ import annotations

from typing import Any

from rolltap.dialects import stops
from rolltap.dialects._stream_shared import (
    dict_field,
    dumps,
    int_field,
    load_object,
    opt_int,
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
    Usage,
)
from rolltap.dialects.sse import SSEEvent
from rolltap.errors import UpstreamProtocolError

__all__ = ["MessagesStreamParser"]

_STOP_IN = stops.MESSAGES_IN  # others (pause_turn…) go to extras
_KINDS: dict[str, BlockKind] = {"text": "text", "thinking": "reasoning", "tool_use": "tool_call"}
# the delta type and the key holding its text, per canonical block kind
_DELTA_KEYS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
}


def _usage(raw: object, base: Usage) -> Usage:
    """Fold an Anthropic usage object into ``base`` (fields it lacks are kept)."""
    if not isinstance(raw, dict):
        return base
    cache_read = opt_int(raw, "cache_read_input_tokens")
    fresh = opt_int(raw, "input_tokens")
    total_in = base.input_tokens
    if fresh is not None:
        # canonical input counts the whole prompt; Anthropic counts cache apart
        total_in = fresh + (cache_read or 0) + (opt_int(raw, "cache_creation_input_tokens") or 0)
    output = opt_int(raw, "output_tokens")
    return Usage(
        input_tokens=total_in,
        output_tokens=base.output_tokens if output is None else output,
        cache_read_tokens=base.cache_read_tokens if cache_read is None else cache_read,
        reasoning_tokens=base.reasoning_tokens,
    )


class MessagesStreamParser:
    """Anthropic stream events in, canonical stream events out."""

    __slots__ = (
        "_blocks",
        "_done",
        "_extras",
        "_map",
        "_signatures",
        "_stop",
        "_stop_seq",
        "_usage",
    )

    def __init__(self) -> None:
        self._done = False
        self._blocks = 0
        self._map: dict[int, int | None] = {}  # open upstream index -> canonical (None: kept raw)
        self._signatures: dict[int, str] = {}
        self._stop: StopReason | None = None
        self._stop_seq: str | None = None
        self._usage: Usage | None = None
        self._extras: dict[str, Any] = {}

    @property
    def done(self) -> bool:
        """True once ``message_stop`` has been seen."""
        return self._done

    @property
    def extras(self) -> dict[str, Any]:
        """Upstream content with no canonical event: ``blocks`` (content blocks of other
        types, e.g. ``redacted_thinking``, as started), ``citations``, ``stop_reason``
        when it had no canonical meaning."""
        return self._extras

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """One upstream SSE event in; the canonical events it completes out."""
        if event.data is None:
            return []
        if self._done:
            raise UpstreamProtocolError("messages stream: event after message_stop")
        obj = load_object(event.data, "messages")
        kind = obj.get("type")
        if kind == "content_block_delta":
            return self._delta(obj)
        if kind == "content_block_start":
            return self._start(obj)
        if kind == "content_block_stop":
            index = self._map.pop(int_field(obj, "index", "content_block_stop"), -1)
            if index == -1:
                raise UpstreamProtocolError("messages stream: content_block_stop for no block")
            if index is None:
                return []
            return [BlockStop(index, self._signatures.pop(index, None))]
        if kind == "message_start":
            message = dict_field(obj, "message", "message_start")
            self._usage = _usage(message.get("usage"), Usage())
            where = "message_start.message"
            ident, model = str_field(message, "id", where), str(message.get("model") or "")
            return [StreamStart(ident, model, self._usage)]
        if kind == "message_delta":
            self._message_delta(obj)
            return []
        if kind == "message_stop":
            return self._finish()
        if kind == "error":
            raise stream_error("messages", obj.get("error"))
        return []  # ping, and event types added after this was written

    def eof(self) -> list[StreamEvent]:
        """The upstream closed the stream; an error unless it had ended."""
        if not self._done:
            raise UpstreamProtocolError("messages stream ended before message_stop")
        return []

    def _start(self, obj: dict[str, Any]) -> list[StreamEvent]:
        upstream = int_field(obj, "index", "content_block_start")
        block = dict_field(obj, "content_block", "content_block_start")
        if upstream in self._map:
            raise UpstreamProtocolError(f"messages stream: block {upstream} started twice")
        kind = _KINDS.get(str(block.get("type")))
        if kind is None:
            self._map[upstream] = None
            self._extras.setdefault("blocks", []).append(block)
            return []
        index = self._map[upstream] = self._blocks
        self._blocks += 1
        if kind == "tool_call":
            where = "content_block_start.content_block"
            ident, name = str_field(block, "id", where), str_field(block, "name", where)
            out: list[StreamEvent] = [BlockStart(index, kind, ident, name)]
            if block.get("input"):  # normally {} with the JSON streamed as deltas
                out.append(BlockDelta(index, dumps(block["input"]).decode()))
            return out
        out = [BlockStart(index, kind)]
        initial = block.get("text" if kind == "text" else "thinking")
        if initial and isinstance(initial, str):
            out.append(BlockDelta(index, initial))
        if kind == "reasoning" and block.get("signature"):
            self._signatures[index] = str(block["signature"])
        return out

    def _delta(self, obj: dict[str, Any]) -> list[StreamEvent]:
        upstream = int_field(obj, "index", "content_block_delta")
        if upstream not in self._map:
            raise UpstreamProtocolError(f"messages stream: delta for block {upstream} not open")
        index = self._map[upstream]
        delta = dict_field(obj, "delta", "content_block_delta")
        if index is None:
            return []
        dtype = delta.get("type")
        key = _DELTA_KEYS.get(dtype) if isinstance(dtype, str) else None
        if key is not None:
            text = str_field(delta, key, "content_block_delta.delta")
            return [BlockDelta(index, text)] if text else []
        if dtype == "signature_delta":
            signature = str_field(delta, "signature", "content_block_delta.delta")
            self._signatures[index] = signature  # replaces, as the SDK's accumulator does
        elif dtype == "citations_delta":
            self._extras.setdefault("citations", []).append(delta.get("citation"))
        return []

    def _message_delta(self, obj: dict[str, Any]) -> None:
        delta = obj.get("delta")
        if isinstance(delta, dict):
            reason = delta.get("stop_reason")
            if isinstance(reason, str):
                self._stop = _STOP_IN.get(reason)
                if self._stop is None:
                    self._extras["stop_reason"] = reason
            if isinstance(delta.get("stop_sequence"), str):
                self._stop_seq = delta["stop_sequence"]
        self._usage = _usage(obj.get("usage"), self._usage or Usage())

    def _finish(self) -> list[StreamEvent]:
        if self._usage is None:
            raise UpstreamProtocolError("messages stream: message_stop before message_start")
        out: list[StreamEvent] = [
            BlockStop(index, self._signatures.pop(index, None))
            for index in self._map.values()
            if index is not None
        ]
        self._map.clear()
        self._done = True
        out.append(StreamEnd(self._stop, self._usage, self._stop_seq))
        return out
