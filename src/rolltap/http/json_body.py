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

__all__ = [
    "MAX_JSON_DEPTH",
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
#: each thread's wrapper: (its innermost array, the outermost)
_WRAPPERS = threading.local()


def _too_deep(value: object) -> bool:
    inner, outer = _wrapper()
    inner.append(value)
    try:
        orjson.dumps(outer)
    except orjson.JSONEncodeError as exc:
        # its other refusals (a key that is not a string, say) are not about depth
        return "Recursion limit" in str(exc)
    finally:
        inner.clear()
    return False


def _wrapper() -> tuple[list[Any], list[Any]]:
    made: tuple[list[Any], list[Any]] | None = getattr(_WRAPPERS, "made", None)
    if made is None:
        inner: list[Any] = []
        outer = inner
        for _ in range(_WRAP - 1):
            outer = [outer]
        made = _WRAPPERS.made = (inner, outer)
    return made


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
    if _too_deep(body):
        raise InvalidRequestError(f"nested deeper than {MAX_JSON_DEPTH} levels", field="body")


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
