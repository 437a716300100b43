"""Server-sent events framing: an incremental splitter that keeps the exact bytes.

The gateway relays upstream bytes unchanged but must see each complete event to
record it and to stop before relaying a broken one. :class:`SSESplitter` buffers only
the incomplete tail of what has arrived.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["SSEEvent", "SSESplitter", "encode_comment", "encode_data"]

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class SSEEvent(NamedTuple):
    """One complete event: its raw bytes (delimiter included) and its data field."""

    raw: bytes
    data: bytes | None
    event: bytes | None


class SSESplitter:
    """Feed chunks as they arrive; get back the events they complete.

    >>> s = SSESplitter()
    >>> s.feed(b'data: {"a"')
    []
    >>> [e.data for e in s.feed(b': 1}\\n\\ndata: [DONE]\\n\\n')]
    [b'{"a": 1}', b'[DONE]']
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" not in buf:  # the usual line ends: split in C (this runs per token)
            bodies = buf.split(b"\n\n")
            self._buf = bodies.pop()
            return [_parse(body + b"\n\n", body) for body in bodies]
        out: list[SSEEvent] = []
        start = 0
        for match in _BOUNDARY.finditer(buf):
            end = match.end()
            out.append(_parse(buf[start:end], buf[start : match.start()]))
            start = end
        self._buf = buf[start:]
        return out

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not been completed yet."""
        return self._buf


def _parse(raw: bytes, body: bytes) -> SSEEvent:
    # the usual event, one data line (a tuple built in C: this runs per token)
    if body.startswith(b"data: ") and b"\n" not in body and b"\r" not in body:
        return SSEEvent(raw, body[6:], None)
    data: list[bytes] = []
    event: bytes | None = None
    for line in body.splitlines():
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            event = line[6:].strip()
    return SSEEvent(raw=raw, data=b"\n".join(data) if data else None, event=event)


def encode_data(payload: bytes, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def encode_comment(text: str = "keepalive") -> bytes:
    return b": " + text.encode() + b"\n\n"
