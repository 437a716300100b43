"""Incremental stream translation between wire dialects.

A translated stream is ``renderer.render(e)`` for each ``e`` in ``parser.feed(sse)``:
one upstream SSE event in, zero or more complete SSE frames out, with no buffering
beyond what the target dialect needs (Responses folds the output items for its
final ``response.completed``).

Dialects: ``chat`` (OpenAI chat completions), ``messages`` (Anthropic Messages),
``responses`` (OpenAI Responses).

>>> from rolltap.dialects.sse import SSESplitter
>>> parser = stream_parser("chat")
>>> renderer = stream_renderer("messages", model="m")
>>> wire = b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}\\n\\n'
>>> frames = b"".join(renderer.render(e) for s in SSESplitter().feed(wire) for e in parser.feed(s))
>>> frames.count(b"event: ")
3
"""

from __future__ import annotations

from typing import Any, Protocol

from rolltap.dialects._stream_shared import UpstreamStreamError
from rolltap.dialects.canonical import StreamEvent
from rolltap.dialects.chat.stream_parse import ChatStreamParser
from rolltap.dialects.chat.stream_render import ChatStreamRenderer
from rolltap.dialects.messages.stream_parse import MessagesStreamParser
from rolltap.dialects.messages.stream_render import MessagesStreamRenderer
from rolltap.dialects.responses.stream_parse import ResponsesStreamParser
from rolltap.dialects.responses.stream_render import ResponsesStreamRenderer
from rolltap.dialects.sse import SSEEvent
from rolltap.errors import ConfigError, RolltapError

__all__ = [
    "DIALECTS",
    "ChatStreamParser",
    "ChatStreamRenderer",
    "MessagesStreamParser",
    "MessagesStreamRenderer",
    "ResponsesStreamParser",
    "ResponsesStreamRenderer",
    "StreamParser",
    "StreamRenderer",
    "UpstreamStreamError",
    "stream_parser",
    "stream_renderer",
]

DIALECTS = ("chat", "messages", "responses")


class StreamParser(Protocol):
    """Turns one dialect's upstream SSE events into canonical stream events."""

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """One upstream event in, the canonical events it completes out; raises
        :class:`~rolltap.errors.UpstreamProtocolError` on a malformed event and
        :class:`UpstreamStreamError` (a subclass) on an upstream error event."""
        ...

    def eof(self) -> list[StreamEvent]:
        """The upstream closed the stream: final events, or UpstreamProtocolError
        when it ended early."""
        ...

    @property
    def done(self) -> bool:
        """True after the terminal event (``StreamEnd`` has been returned)."""
        ...

    @property
    def extras(self) -> dict[str, Any]:
        """Upstream data with no canonical event that the recorder keeps (logprobs…)."""
        ...


class StreamRenderer(Protocol):
    """Turns canonical stream events into one dialect's SSE frames."""

    def render(self, event: StreamEvent) -> bytes:
        """Zero or more complete SSE frames for ``event``."""
        ...

    def keepalive(self) -> bytes:
        """A frame clients of this dialect ignore, to keep an idle stream open."""
        ...

    def error(self, err: RolltapError) -> bytes:
        """An in-band error frame in this dialect's shape; its SDK raises on it."""
        ...


_PARSERS: dict[str, type[ChatStreamParser | MessagesStreamParser | ResponsesStreamParser]] = {
    "chat": ChatStreamParser,
    "messages": MessagesStreamParser,
    "responses": ResponsesStreamParser,
}
_RENDERERS: dict[
    str, type[ChatStreamRenderer | MessagesStreamRenderer | ResponsesStreamRenderer]
] = {
    "chat": ChatStreamRenderer,
    "messages": MessagesStreamRenderer,
    "responses": ResponsesStreamRenderer,
}


def stream_parser(dialect: str) -> StreamParser:
    """A fresh parser for one upstream stream of ``dialect``."""
    cls = _PARSERS.get(dialect)
    if cls is None:
        raise ConfigError(f"unknown stream dialect {dialect!r}; expected one of {DIALECTS}")
    return cls()


def stream_renderer(dialect: str, *, model: str, include_usage: bool = False) -> StreamRenderer:
    """A fresh renderer for one harness stream of ``dialect``; ``model`` is the name
    the harness sees; ``include_usage`` asks chat for its usage chunk (the other
    dialects always carry usage)."""
    cls = _RENDERERS.get(dialect)
    if cls is None:
        raise ConfigError(f"unknown stream dialect {dialect!r}; expected one of {DIALECTS}")
    return cls(model=model, include_usage=include_usage)
