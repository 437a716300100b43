"""A body that must be a JSON object, parsed once (orjson, no aiohttp): a request's
(a 400 when it is not), an upstream's answer or one event of its stream (a 502).

>>> load_json_object(b'{"model": "m"}')
{'model': 'm'}
"""

from __future__ import annotations

import threading
from typing import Any

import orjson

from rolltap.errors import InvalidRequestError, MalformedJSONError, UpstreamProtocolError
from rolltap.events.jsonbytes import COPY_FROM

__all__ = [
    "MAX_JSON_DEPTH",
    "EncodedMembers",
    "check_depth",
    "load_json_object",
    "parse_json_object",
    "stream_event_object",
    "upstream_json_object",
    "upstream_stream_event",
]

#: the deepest nesting a request body may have (objects and arrays, empty ones too):
#: orjson parses up to 1024 levels but writes only 254, and pydantic serializes less, so
#: a deeper body accepted here could not be recorded or passed on
MAX_JSON_DEPTH = 128
#: orjson refuses to write a value nested this deep
_ORJSON_WRITES_BELOW = 255
#: a value wrapped in this many arrays is written by orjson exactly when it nests no
#: deeper than MAX_JSON_DEPTH: the check runs in C (a body's history is thousands of
#: nodes, too many to walk in Python on every call)
_WRAP = _ORJSON_WRITES_BELOW - 1 - MAX_JSON_DEPTH
#: each thread's wrappers by depth: (its innermost array, the outermost)
_WRAPPERS = threading.local()


def _too_deep(exc: orjson.JSONEncodeError) -> InvalidRequestError | None:
    """The refusal of a body whose wrapped write failed with ``exc``, if it failed for
    its depth (orjson's other refusals, a key that is not a string, say, are not)."""
    if "Recursion limit" not in str(exc):
        return None
    return InvalidRequestError(f"nested deeper than {MAX_JSON_DEPTH} levels", field="body")


def _wrapped(value: object, arrays: int) -> bytes:
    """``value`` written inside ``arrays`` arrays (``[[…value…]]``)."""
    inner, outer = _wrapper(arrays)
    inner.append(value)
    try:
        return orjson.dumps(outer)
    finally:
        inner.clear()


def _wrapper(arrays: int) -> tuple[list[Any], list[Any]]:
    made: dict[int, tuple[list[Any], list[Any]]] | None = getattr(_WRAPPERS, "made", None)
    if made is None:
        made = _WRAPPERS.made = {}
    pair = made.get(arrays)
    if pair is None:
        inner: list[Any] = []
        outer = inner
        for _ in range(arrays - 1):
            outer = [outer]
        pair = made[arrays] = (inner, outer)
    return pair


def load_json_object(raw: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object; 400 ``malformed_json``/``invalid_request``."""
    body = parse_json_object(raw)
    check_depth(body)
    return body


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """:func:`load_json_object` but for the depth, which :func:`check_depth` checks (on
    the part of a body not checked before)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedJSONError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("request body must be a JSON object", field="body")
    return body


def check_depth(body: dict[str, Any]) -> None:
    """400 ``invalid_request`` when ``body`` nests deeper than :data:`MAX_JSON_DEPTH`."""
    try:
        _wrapped(body, _WRAP)
    except orjson.JSONEncodeError as exc:
        error = _too_deep(exc)
        if error is not None:
            raise error from exc


class EncodedMembers:
    """A request body checked for depth member by member, each member's JSON kept, so
    the body is written again after a few top-level values change (a relay's rewrites:
    its ``model``, the run's sampling) from the bytes of the rest — the depth check and
    the body's encoding in one pass over it instead of two.

    :meth:`encode` gives exactly ``orjson.dumps(body)``: members in the body's order, a
    value still the object that was checked reused, any other written anew.

    >>> body = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}
    >>> members = EncodedMembers.check(body)
    >>> body["model"] = "b"
    >>> members.encode(body) == orjson.dumps(body)
    True
    """

    __slots__ = ("_members",)

    def __init__(self, members: dict[str, tuple[object, bytes | memoryview]]) -> None:
        #: key -> (the value checked, the member's JSON: ``"key":value``)
        self._members = members

    @classmethod
    def check(cls, body: dict[str, Any]) -> EncodedMembers:
        """``body``'s members written; 400 ``invalid_request`` when it nests deeper than
        :data:`MAX_JSON_DEPTH` (a member written as a one-member object nests as deep as
        the body does through it)."""
        members: dict[str, tuple[object, bytes | memoryview]] = {}
        arrays = _WRAP
        try:
            for key, value in body.items():
                whole = _wrapped({key: value}, arrays)
                # ``[[…{"key":value}…]]``: the member is the object's inside; a large one
                # copied to its size (orjson's buffer reserves ~10 × a string's length)
                inside = memoryview(whole)[arrays + 1 : -arrays - 1]
                member = inside.tobytes() if len(inside) >= COPY_FROM else inside
                members[key] = (value, member)
        except orjson.JSONEncodeError as exc:
            error = _too_deep(exc)
            raise error or InvalidRequestError(f"body cannot be written as JSON: {exc}") from exc
        return cls(members)

    def encode(self, body: dict[str, Any]) -> bytes:
        """``orjson.dumps(body)``, reusing the bytes of every member whose value is
        still the one checked."""
        parts: list[bytes | memoryview] = [b"{"]
        members = self._members
        for key, value in body.items():
            kept = members.get(key)
            if kept is not None and kept[0] is value:
                parts.append(kept[1])
            else:
                parts.append(orjson.dumps({key: value})[1:-1])
            parts.append(b",")
        if len(parts) > 1:
            parts.pop()  # the last comma
        parts.append(b"}")
        return b"".join(parts)  # one copy of a history's bytes

    def around(self, key: str) -> tuple[bytes, bytes]:
        """What :meth:`encode` writes before member ``key`` (from the opening brace) and
        after it (to the closing one), for the body checked, unchanged."""
        before: list[bytes | memoryview] = [b"{"]
        after: list[bytes | memoryview] = []
        side = before
        for name, (_, member) in self._members.items():
            if name == key:
                side = after
                continue
            side.append(member)
            side.append(b",")
        if after:
            after[-1] = b"}"
            after.insert(0, b",")
        else:
            after.append(b"}")
        return b"".join(before), b"".join(after)

    def member(self, key: str) -> bytes | memoryview | None:
        """Member ``key``'s JSON (``"key":value``) as kept."""
        kept = self._members.get(key)
        return None if kept is None else kept[1]

    def replace(self, key: str, member: bytes | memoryview) -> None:
        """Keep ``member`` as member ``key``'s JSON (the same value written otherwise: a
        relay's own bytes of it, which must be what orjson writes)."""
        value, _ = self._members[key]
        self._members[key] = (value, member)

    def json_of(self, key: str, value: object) -> memoryview | None:
        """``orjson.dumps(value)`` when ``value`` is the one checked as ``key``'s (None
        when it is not, or no such member was checked)."""
        kept = self._members.get(key)
        if kept is None or kept[0] is not value:
            return None
        return memoryview(kept[1])[len(orjson.dumps(key)) + 1 :]  # past ``"key":``


def upstream_json_object(raw: bytes) -> dict[str, Any]:
    """An upstream's answer that must be a JSON object; ``upstream_bad_response`` if not."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"upstream returned invalid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise UpstreamProtocolError("upstream returned a JSON value that is not an object")
    return parsed


def upstream_stream_event(data: bytes, source: str = "upstream") -> dict[str, Any]:
    """One event of an upstream's stream as a JSON object (:func:`stream_event_object`)
    that reports no ``error``; ``upstream_bad_response`` if it does."""
    event = stream_event_object(data, source)
    if "error" in event:
        raise UpstreamProtocolError(f"{source} stream reported an error: {event['error']!r}")
    return event


def stream_event_object(data: bytes, source: str) -> dict[str, Any]:
    """One event's data in the stream ``source`` names (an upstream, a dialect) as a JSON
    object; ``upstream_bad_response`` if it is not."""
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamProtocolError(f"{source} stream: event data is not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise UpstreamProtocolError(f"{source} stream: event data is not a JSON object")
    return event
