"""Moving one upstream stream to the harness, recording it on the way; and a whole
answer made into a stream.

:class:`StreamRelay` has three shapes, chosen by the call's :class:`~rolltap.gateway.call.Path`
(one interface: ``feed`` a chunk, get the bytes to write; ``finish`` at the upstream's
end of stream; ``recorded`` for the response event):

- chat to chat (the fast path): bytes relayed as they came, chunks folded by
  :class:`~rolltap.gateway.answer_record.ChatStreamAccumulator` once they are on their way
  (a chunk's fold waits for the next chunk, or the end: what a read of many events
  brings reaches the harness before it is folded); the usage-only chunk is withheld
  when the gateway itself asked for it; with a server-side token capture each chunk
  loses the ids (and logprobs) the gateway asked for, re-serialized;
- same dialect otherwise: bytes relayed as they came, events parsed and folded to
  record the answer;
- different dialects: the upstream's events are parsed into canonical events and
  rendered as the harness's, incrementally.

Keepalive and in-band error frames (the harness dialect's own) are the call's.
:func:`events_of` unfolds a whole canonical answer into the events of a stream.
"""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.clients.capture import ServerCapture, captured_fields
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
    ToolCall,
    Usage,
)
from rolltap.dialects.sse import SSEEvent, SSESplitter, encode_data
from rolltap.dialects.streams import StreamParser, StreamRenderer, stream_parser
from rolltap.errors import UpstreamProtocolError
from rolltap.gateway.answer_record import (
    ChatStreamAccumulator,
    StreamFolder,
    chat_stream_recorded,
    folded_stream_recorded,
)
from rolltap.http.json_body import upstream_stream_event

__all__ = ["StreamRelay", "events_of"]


class StreamRelay:
    """One stream's translation and recording state."""

    __slots__ = (
        "_acc", "_capture", "_done", "_folder", "_frames", "_parser", "_split", "_strip",
        "_unfolded", "_upstream", "_xlate",
    )  # fmt: skip

    def __init__(
        self, upstream: Dialect, frames: StreamRenderer, *, translate: bool, chat: bool,
        harness_usage: bool, capture: ServerCapture | None = None,
    ) -> None:  # fmt: skip
        self._split = SSESplitter()
        self._capture = capture
        self._upstream, self._xlate = upstream, translate
        # a chat harness that did not ask for the usage chunk does not get it
        self._strip = not harness_usage
        self._done = False
        # the harness dialect's renderer, used for content when translating
        self._frames = frames
        self._acc: ChatStreamAccumulator | None = None
        #: chat chunks relayed but not folded yet
        self._unfolded: list[dict[str, Any]] = []
        self._parser: StreamParser | None = None
        self._folder = StreamFolder()
        if chat:
            self._acc = ChatStreamAccumulator()
        else:
            self._parser = stream_parser(upstream.name)

    def feed(self, chunk: bytes) -> bytes:
        """Bytes for the harness after ``chunk`` from the upstream (maybe none yet)."""
        events = self._split.feed(chunk)
        if self._acc is not None:
            self._fold_pending(self._acc)  # the previous chunk's: written by now
            return self._relay_chat(events)
        return self._translate(events)

    def finish(self) -> bytes:
        """The upstream closed the stream: final bytes, or an error if it ended early."""
        if self._parser is not None:
            events = self._parser.eof()
            self._folder.add(events)
            return self._render(events)
        if not self._done:
            raise UpstreamProtocolError("upstream stream ended before [DONE]")
        return b""

    @property
    def ended(self) -> bool:
        """Whether the stream's terminal event has been through :meth:`feed` (its bytes
        for the harness returned): all the harness needs of the answer."""
        return self._done if self._parser is None else self._parser.done

    def recorded(self) -> dict[str, Any]:
        """``body`` (in the upstream's dialect), the summary fields and ``chunks``."""
        capture = self._capture
        if self._acc is not None:
            self._fold_pending(self._acc)
            out = chat_stream_recorded(self._acc)
            tokens = None if capture is None else capture.record()
        else:
            extras = self._parser.extras if self._parser is not None else {}
            tokens = None if capture is None else capture.take_extras_of(extras)
            out = folded_stream_recorded(self._folder, self._upstream, extras)
        if capture is not None:
            out.update(captured_fields(tokens))
        return out

    def _translate(self, events: list[SSEEvent]) -> bytes:
        assert self._parser is not None
        out: list[bytes] = []
        for ev in events:
            canonical = self._parser.feed(ev)
            self._folder.add(canonical)
            out.append(self._render(canonical) if self._xlate else ev.raw)
        return b"".join(out)

    def _render(self, events: list[Any]) -> bytes:
        if not self._xlate:
            return b""
        return b"".join(self._frames.render(e) for e in events)

    def _fold_pending(self, acc: ChatStreamAccumulator) -> None:
        for obj in self._unfolded:
            acc.add(obj)
        self._unfolded.clear()

    def _relay_chat(self, events: list[SSEEvent]) -> bytes:
        keep: list[bytes] = []
        for ev in events:
            if ev.data is None:
                keep.append(ev.raw)
                continue
            if ev.data == b"[DONE]":
                self._done = True
                keep.append(ev.raw)
                continue
            obj = upstream_stream_event(ev.data)
            raw = ev.raw
            if self._capture is not None and self._capture.take_chunk(obj):
                raw = encode_data(orjson.dumps(obj))  # chat's framing: one data line
            self._unfolded.append(obj)
            if self._strip and not obj.get("choices") and obj.get("usage"):
                continue
            keep.append(raw)
        return b"".join(keep)


def events_of(resp: Response) -> list[StreamEvent]:
    """The stream events a complete answer unfolds into (one delta per block).

    >>> from rolltap.dialects.canonical import Text
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
