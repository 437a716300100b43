"""Anthropic Messages streams, harness side: canonical events to ``message_*`` events."""

from __future__ import annotations

from typing import Any

from rolltap.dialects import stops
from rolltap.dialects._stream_shared import (
    UpstreamStreamError,
    dumps,
)
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Usage,
)
from rolltap.errors import RolltapError

__all__ = ["MessagesStreamRenderer"]


def _frame(name: bytes) -> bytes:
    return b"event: " + name + b'\ndata: {"type":"' + name + b'",'


_DELTA = _frame(b"content_block_delta")
_BLOCK_START = _frame(b"content_block_start")
_BLOCK_STOP = _frame(b"content_block_stop")
_DELTA_OPEN: dict[BlockKind, bytes] = {
    "text": b',"delta":{"type":"text_delta","text":',
    "reasoning": b',"delta":{"type":"thinking_delta","thinking":',
    "tool_call": b',"delta":{"type":"input_json_delta","partial_json":',
}
_STOP_OUT = stops.json_names(stops.MESSAGES_OUT, "end_turn")
_ERROR_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
    }
)
_PING = b'event: ping\ndata: {"type":"ping"}\n\n'


class MessagesStreamRenderer:
    """Canonical stream events in, Anthropic stream events out."""

    __slots__ = ("_cache_read", "_index", "_input", "_kinds", "_model", "_open")

    def __init__(self, *, model: str, include_usage: bool = False) -> None:
        # include_usage is accepted for a uniform factory: Anthropic always sends usage
        self._model = model
        self._kinds: dict[int, BlockKind] = {}
        self._index: dict[int, bytes] = {}  # canonical index -> b'"index":n'
        self._open: list[int] = []
        self._input = 0
        self._cache_read: int | None = None

    def render(self, event: StreamEvent) -> bytes:
        """The frames for one canonical event."""
        if isinstance(event, BlockDelta):
            opening = _DELTA_OPEN[self._kinds[event.index]]
            return _DELTA + self._index[event.index] + opening + dumps(event.text) + b"}}\n\n"
        if isinstance(event, BlockStart):
            return self._start(event)
        if isinstance(event, BlockStop):
            return self._stop(event)
        if isinstance(event, StreamStart):
            return self._message_start(event)
        return self._end(event)

    def _message_start(self, event: StreamStart) -> bytes:
        usage = event.usage or Usage()
        self._input, self._cache_read = usage.input_tokens, usage.cache_read_tokens
        message: dict[str, Any] = {
            "id": event.id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self._model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage_dict(usage.output_tokens),
        }
        return (
            b'event: message_start\ndata: {"type":"message_start","message":'
            + dumps(message)
            + b"}\n\n"
        )

    def _usage_dict(self, output_tokens: int) -> dict[str, Any]:
        fresh = self._input - (self._cache_read or 0)
        out: dict[str, Any] = {"input_tokens": max(fresh, 0), "output_tokens": output_tokens}
        if self._cache_read is not None:
            out["cache_read_input_tokens"] = self._cache_read
        return out

    def _start(self, event: BlockStart) -> bytes:
        position = b'"index":' + str(len(self._index)).encode()
        self._index[event.index] = position
        self._kinds[event.index] = event.kind
        self._open.append(event.index)
        if event.kind == "text":
            block = b'{"type":"text","text":""}'
        elif event.kind == "reasoning":
            block = b'{"type":"thinking","thinking":"","signature":""}'
        else:
            block = dumps({"type": "tool_use", "id": event.id, "name": event.name, "input": {}})
        return _BLOCK_START + position + b',"content_block":' + block + b"}\n\n"

    def _stop(self, event: BlockStop) -> bytes:
        if event.index not in self._open:
            return b""
        self._open.remove(event.index)
        position = self._index[event.index]
        out = b""
        if event.signature is not None and self._kinds[event.index] == "reasoning":
            signature = b',"delta":{"type":"signature_delta","signature":' + dumps(event.signature)
            out = _DELTA + position + signature + b"}}\n\n"
        return out + _BLOCK_STOP + position + b"}\n\n"

    def _end(self, event: StreamEnd) -> bytes:
        # blocks left open by a lenient upstream still get closed for the client
        out = b"".join(self._stop(BlockStop(index)) for index in tuple(self._open))
        if event.usage.input_tokens:  # chat upstreams only know it at the end
            self._input = event.usage.input_tokens
        if event.usage.cache_read_tokens is not None:
            self._cache_read = event.usage.cache_read_tokens
        delta = b'{"stop_reason":' + _STOP_OUT.get(event.stop_reason, b'"end_turn"')
        delta += b',"stop_sequence":' + dumps(event.stop_sequence) + b"}"
        usage = dumps(self._usage_dict(event.usage.output_tokens))
        out += b'event: message_delta\ndata: {"type":"message_delta","delta":' + delta
        out += b',"usage":' + usage + b"}\n\n"
        return out + b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

    def keepalive(self) -> bytes:
        """An ``event: ping`` frame, which Anthropic clients skip."""
        return _PING

    def error(self, err: RolltapError) -> bytes:
        """An in-band ``event: error`` frame; the Anthropic SDK raises on it."""
        kind = err.type if err.type in _ERROR_TYPES else "api_error"
        if isinstance(err, UpstreamStreamError) and err.upstream_type in _ERROR_TYPES:
            kind = err.upstream_type or kind  # the upstream's own type, e.g. overloaded
        body = {"type": "error", "error": {"type": kind, "message": err.message, "code": err.code}}
        return b"event: error\ndata: " + dumps(body) + b"\n\n"
