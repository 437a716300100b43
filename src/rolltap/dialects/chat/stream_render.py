"""OpenAI chat-completions streams, harness side: canonical events to chunk frames."""

from __future__ import annotations

import time

from rolltap.dialects import stops
from rolltap.dialects._stream_shared import (
    dumps,
)
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockKind,
    BlockStart,
    StreamEnd,
    StreamEvent,
    StreamStart,
)
from rolltap.dialects.chat.check import error_body
from rolltap.dialects.chat.response import openai_usage_dict
from rolltap.errors import RolltapError

__all__ = ["ChatStreamRenderer"]

_STOP_OUT = stops.json_names(stops.CHAT_OUT, "stop")

_NULL_TAIL = b'},"logprobs":null,"finish_reason":null}]}\n\n'
_DONE = b"data: [DONE]\n\n"


class ChatStreamRenderer:
    """Canonical stream events in, chat-completion chunk frames out.

    Every chunk shares one prefix (id, created, model), built once at
    :class:`StreamStart`; each delta only serialises its own text.
    """

    __slots__ = ("_created", "_head", "_include_usage", "_kinds", "_model", "_tools")

    def __init__(self, *, model: str, include_usage: bool = False) -> None:
        self._model = model
        self._include_usage = include_usage
        self._created = int(time.time())
        self._head = self._prefix("chatcmpl-rolltap")
        self._kinds: dict[int, BlockKind] = {}
        self._tools: dict[int, bytes] = {}  # block index -> b'"index":k'

    def _prefix(self, ident: str) -> bytes:
        return (
            b'data: {"id":'
            + dumps(ident)
            + b',"object":"chat.completion.chunk","created":'
            + str(self._created).encode()
            + b',"model":'
            + dumps(self._model)
            + b',"choices":['
        )

    def render(self, event: StreamEvent) -> bytes:
        """The frames for one canonical event (possibly none)."""
        if isinstance(event, BlockDelta):
            kind = self._kinds[event.index]
            if kind == "text":
                return (
                    self._head + b'{"index":0,"delta":{"content":' + dumps(event.text) + _NULL_TAIL
                )
            if kind == "reasoning":
                body = b'{"reasoning_content":' + dumps(event.text)
                return self._head + b'{"index":0,"delta":' + body + _NULL_TAIL
            args = dumps(event.text)
            call = b"[{" + self._tools[event.index] + b',"function":{"arguments":' + args + b"}}]"
            return self._head + b'{"index":0,"delta":{"tool_calls":' + call + _NULL_TAIL
        if isinstance(event, BlockStart):
            return self._start(event)
        if isinstance(event, StreamStart):
            self._head = self._prefix(event.id or "chatcmpl-rolltap")
            role = b'{"index":0,"delta":{"role":"assistant","content":""'
            return self._head + role + _NULL_TAIL
        if isinstance(event, StreamEnd):
            return self._end(event)
        # BlockStop: chat has no block boundaries (and no place for a signature)
        return b""

    def _start(self, event: BlockStart) -> bytes:
        self._kinds[event.index] = event.kind
        if event.kind != "tool_call":
            return b""
        position = b'"index":' + str(len(self._tools)).encode()
        self._tools[event.index] = position
        opening = b'"id":' + dumps(event.id) + b',"type":"function","function":{"name":'
        opening += dumps(event.name) + b',"arguments":""}'
        body = b'{"tool_calls":[{' + position + b"," + opening + b"}]"
        return self._head + b'{"index":0,"delta":' + body + _NULL_TAIL

    def _end(self, event: StreamEnd) -> bytes:
        finish = _STOP_OUT.get(event.stop_reason, b'"stop"')
        out = self._head + b'{"index":0,"delta":{},"logprobs":null,"finish_reason":' + finish
        out += b"}]}\n\n"
        if self._include_usage:
            usage = openai_usage_dict(event.usage, "prompt_tokens", "completion_tokens")
            out += self._head + b'],"usage":' + dumps(usage) + b"}\n\n"
        return out + _DONE

    def keepalive(self) -> bytes:
        """An SSE comment: every chat client skips it."""
        return b": keepalive\n\n"

    def error(self, err: RolltapError) -> bytes:
        """An in-band ``data: {"error": ...}`` frame; the OpenAI SDK raises on it."""
        # the same body as a non-streamed error: code, type, param and upstream detail
        return b"data: " + error_body(err) + b"\n\n"
