"""Top-level fields of a JSON object set in its bytes, without encoding it again.

A relayed body changes in a few top-level fields (its ``model``, the run's sampling);
encoding the whole parsed body again costs a pass over the history (and orjson's room
for the worst case of it). :func:`splice_fields` writes the new values into the
harness's own bytes instead: a replaced field where it stands, an added one before the
closing brace. Everything else goes on byte for byte, as the harness wrote it.

It declines (returns None, and the caller encodes the body) whenever it cannot be sure:
a field's key written with escapes, written twice, a value that is not a plain scalar
(an object, an array, a string with escapes), or a key it cannot show is the object's
own — one is, when the bytes before it (or after its value) close into an object at the
top level; that check parses at most :data:`VERIFY_MAX` bytes, so a key far from both
ends declines too.

>>> splice_fields(b'{"model": "a", "messages": []}', {"model": "b", "seed": 1}, {"model"})
b'{"model": "b", "messages": [],"seed":1}'
>>> splice_fields(b'{"meta": {"model": "a"}}', {"model": "b"}, {"model"}) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from typing import Any

import orjson

__all__ = ["VERIFY_MAX", "splice_fields"]

#: the most bytes parsed to show that a key is the object's own
VERIFY_MAX = 4096
#: at most this many fields are replaced where they stand (each costs a scan of the
#: bytes for another occurrence of its key)
_MAX_REPLACED = 2
_WS = frozenset(b" \t\r\n")
#: a scalar value whose bytes end where the match does: a string without escapes, a
#: number, true, false, null
_SCALAR = re.compile(rb'"[^"\\]*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null')


def splice_fields(raw: bytes, changes: Mapping[str, Any], present: Container[str]) -> bytes | None:
    """``raw`` (the bytes of a JSON object, valid) with each top-level field of
    ``changes`` set to its value: those in ``present`` (the object's keys) replaced where
    they stand, the others added at its end. None where that cannot be done safely."""
    replaced = [name for name in changes if name in present]
    if len(replaced) > _MAX_REPLACED:
        return None
    pieces: list[tuple[int, int, bytes]] = []  # (start, end, new bytes), non-overlapping
    for name in replaced:
        span = _value_span(raw, name)
        if span is None:
            return None
        pieces.append((*span, orjson.dumps(changes[name])))
    added = [(name, value) for name, value in changes.items() if name not in present]
    if added:
        end = _closing_brace(raw)
        if end is None:
            return None
        members = b",".join(orjson.dumps(n) + b":" + orjson.dumps(v) for n, v in added)
        before = _last_byte(raw, end)
        pieces.append((end, end, members if before == ord("{") else b"," + members))
    pieces.sort()
    view = memoryview(raw)  # slices of it are not copies: the join is the one copy
    out: list[bytes | memoryview] = []
    at = 0
    for start, end, new in pieces:
        if start < at:
            return None  # two fields in one place: cannot be (keys are unique), but safe
        out += [view[at:start], new]
        at = end
    out.append(view[at:])
    return b"".join(out)


def _value_span(raw: bytes, name: str) -> tuple[int, int] | None:
    """Where the value of the object's own key ``name`` is in ``raw``, when the key is
    written once, plainly, and its value is a scalar."""
    key = orjson.dumps(name)
    pos = raw.rfind(key)
    if pos < 0 or raw.rfind(key, 0, pos) >= 0:
        return None  # absent as written (escapes), or written more than once
    colon = _skip_ws(raw, pos + len(key))
    if colon >= len(raw) or raw[colon] != ord(":"):
        return None  # a string value, not a key
    start = _skip_ws(raw, colon + 1)
    match = _SCALAR.match(raw, start)
    if match is None:
        return None
    end = match.end()
    if not _top_level(raw, pos, end):
        return None
    return start, end


def _top_level(raw: bytes, key: int, end: int) -> bool:
    """Whether the member whose key starts at ``key`` and whose value ends at ``end`` is
    the object's own: what comes before it, or after it, closes into an object."""
    if key <= VERIFY_MAX:
        return _parses(raw[:key] + b'"":0}')
    if len(raw) - end <= VERIFY_MAX:
        return _parses(b'{"":0' + raw[end:])
    return False


def _parses(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def _skip_ws(raw: bytes, i: int) -> int:
    while i < len(raw) and raw[i] in _WS:
        i += 1
    return i


def _closing_brace(raw: bytes) -> int | None:
    i = len(raw) - 1
    while i >= 0 and raw[i] in _WS:
        i -= 1
    return i if i > 0 and raw[i] == ord("}") else None


def _last_byte(raw: bytes, end: int) -> int:
    """The last byte before ``end`` that is not whitespace."""
    i = end - 1
    while i >= 0 and raw[i] in _WS:
        i -= 1
    return raw[i]
