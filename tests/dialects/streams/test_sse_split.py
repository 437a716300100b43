"""The SSE splitter gives the same events however the bytes are cut into chunks.

Its fast path (``\\n`` line ends, one ``data:`` line) must agree with the general one: the
reference here reads the whole stream at once with the spec's three boundaries.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rolltap.dialects.sse import SSEEvent, SSESplitter

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def _reference(wire: bytes) -> list[tuple[bytes, bytes | None, bytes | None]]:
    out = []
    start = 0
    for m in _BOUNDARY.finditer(wire):
        body = wire[start : m.start()]
        data = [
            line[5:].removeprefix(b" ") for line in body.splitlines() if line.startswith(b"data:")
        ]
        events = [line[6:].strip() for line in body.splitlines() if line.startswith(b"event:")]
        out.append((wire[start : m.end()], b"\n".join(data) if data else None,
                    events[-1] if events else None))  # fmt: skip
        start = m.end()
    return out


_line = st.one_of(
    st.builds(lambda v: b"data: " + v, st.binary(max_size=6).filter(lambda b: b"\n" not in b
                                                                       and b"\r" not in b)),
    st.builds(lambda v: b"data:" + v, st.sampled_from([b"x", b" y", b"", b"[DONE]"])),
    st.sampled_from([b"event: message_start", b": keepalive", b"id: 3", b"retry: 10"]),
)  # fmt: skip
_event = st.builds(
    lambda lines, nl: nl.join(lines) + nl + nl,
    st.lists(_line, min_size=1, max_size=3),
    st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"]),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_event, max_size=6), st.data())
def test_any_chunking_gives_the_reference_events(events: list[bytes], data: st.DataObject) -> None:
    wire = b"".join(events) + b"data: {partial"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=5)))
    splitter, got = SSESplitter(), list[SSEEvent]()
    for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        got += splitter.feed(wire[a:b])
    assert [tuple(e) for e in got] == _reference(wire)
    assert b"".join(e.raw for e in got) + splitter.pending == wire
