"""JSON bytes that are kept a while: an event's payload until its commit, a relayed
request's body until its answer.

orjson reserves room for the worst case of what it writes (about ten bytes for each
character of a string) and hands back the bytes object without giving the rest back: a
400 KB history becomes a 4 MB allocation. Nothing notices for bytes written and dropped at
once; bytes held across awaits by hundreds of calls pin that room and fragment the heap
(benchmarks/big_context.py). :func:`dumps_kept` copies a large result to its own size.

>>> dumps_kept({"a": "x" * 10})
b'{"a":"xxxxxxxxxx"}'
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["COPY_FROM", "dumps_kept"]

#: from this size the copy is worth its cost (a few microseconds for 64 KB)
COPY_FROM = 16 * 1024


def dumps_kept(value: Any, option: int | None = None) -> bytes:
    """``orjson.dumps(value, option=option)``, sized to its content when it is large."""
    data = orjson.dumps(value, option=option)
    return memoryview(data).tobytes() if len(data) >= COPY_FROM else data
