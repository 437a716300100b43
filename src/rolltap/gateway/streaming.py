"""Moving one upstream stream to the harness, recording it on the way.

Three shapes, one interface (``feed`` a chunk, get the bytes to write; ``finish`` at
the upstream's end of stream; ``recorded`` for the response event):

- chat to chat (the fast path): bytes relayed as they came, chunks folded by
  :class:`~rolltap.gateway.recording.ChatStreamAccumulator`; the usage-only chunk is
  withheld when the gateway itself asked for it;
- same dialect otherwise: bytes relayed as they came, events parsed and folded to
  record the answer;
- different dialects: the upstream's events are parsed into canonical events and
  rendered as the harness's, incrementally.

Keepalive and in-band error frames (the harness dialect's own) are the call's.
"""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.dialects.registry import Dialect
from rolltap.dialects.sse import SSEEvent, SSESplitter
from rolltap.dialects.streams import StreamParser, StreamRenderer, stream_parser
from rolltap.errors import UpstreamProtocolError
from rolltap.gateway.folding import StreamFolder, summarize_canonical
from rolltap.gateway.recording import ChatStreamAccumulator, summarize_body

__all__ = ["StreamRelay"]


class StreamRelay:
    """One stream's translation and recording state."""

    __slots__ = ("_acc", "_done", "_folder", "_frames", "_parser", "_split", "_strip", "_xlate")

    def __init__(
        self, harness: Dialect, upstream: Dialect, frames: StreamRenderer, *, harness_usage: bool
    ) -> None:
        self._split = SSESplitter()
        self._xlate = harness.name != upstream.name
        # a chat harness that did not ask for the usage chunk does not get it
        self._strip = not harness_usage
        self._done = False
        # the harness dialect's renderer, used for content when translating
        self._frames = frames
        self._acc: ChatStreamAccumulator | None = None
        self._parser: StreamParser | None = None
        self._folder = StreamFolder()
        if upstream.name == "chat" and not self._xlate:
            self._acc = ChatStreamAccumulator()
        else:
            self._parser = stream_parser(upstream.name)

    def feed(self, chunk: bytes) -> bytes:
        """Bytes for the harness after ``chunk`` from the upstream (maybe none yet)."""
        events = self._split.feed(chunk)
        if self._acc is not None:
            return self._fold_chat(events, self._acc)
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

    def recorded(self, upstream: Dialect) -> dict[str, Any]:
        """``body`` (in the upstream's dialect), the summary fields and ``chunks``."""
        if self._acc is not None:
            body = self._acc.body()
            return {"body": body, **summarize_body(body), "chunks": self._acc.chunks}
        resp = self._folder.response()
        out = {"body": upstream.response_from_canonical(resp), **summarize_canonical(resp)}
        out["chunks"] = self._folder.events
        extras = self._parser.extras if self._parser is not None else {}
        if extras:
            out["extras"] = extras
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

    def _fold_chat(self, events: list[SSEEvent], acc: ChatStreamAccumulator) -> bytes:
        keep: list[bytes] = []
        for ev in events:
            if ev.data is None:
                keep.append(ev.raw)
                continue
            if ev.data == b"[DONE]":
                self._done = True
                keep.append(ev.raw)
                continue
            obj = _chunk(ev.data)
            acc.add(obj)
            if self._strip and not obj.get("choices") and obj.get("usage"):
                continue
            keep.append(ev.raw)
        return b"".join(keep)


def _chunk(data: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"upstream sent a malformed stream event: {exc}") from exc
    if not isinstance(obj, dict):
        raise UpstreamProtocolError("upstream sent a stream event that is not an object")
    if "error" in obj:
        raise UpstreamProtocolError(f"upstream stream error: {obj['error']}")
    return obj
