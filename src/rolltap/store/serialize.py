"""Events and JSON documents to and from their stored form (orjson, bytes).

>>> from rolltap.events import Event
>>> row = event_row("s1", Event(0, "note", 1.5, {"text": "hi"}))
>>> row["payload"]
b'{"text":"hi"}'
>>> row_event(0, "note", 1.5, row["payload"]).payload
{'text': 'hi'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from rolltap.events import Event
from rolltap.events.jsonbytes import dumps_kept
from rolltap.store.errors import StoreValidationError

__all__ = [
    "dump_doc",
    "event_json",
    "event_row",
    "event_rows",
    "load_doc",
    "row_event",
]


def dump_doc(value: Mapping[str, Any]) -> str:
    """A run config or session task as JSON text."""
    return _dumps(value).decode()


def load_doc(text: str | bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads(text)
    return loaded


def event_row(session_id: str, event: Event) -> dict[str, Any]:
    """The ``rolltap_events`` row of ``event``."""
    return {
        "session_id": session_id,
        "seq": event.seq,
        "kind": event.kind,
        "ts": event.ts,
        "payload": _dumps(event.payload),
    }


def event_rows(session_id: str, events: Iterable[Event]) -> list[dict[str, Any]]:
    return [event_row(session_id, event) for event in events]


def row_event(seq: int, kind: str, ts: float, payload: bytes) -> Event:
    return Event(seq=seq, kind=kind, ts=ts, payload=orjson.loads(payload))


def event_json(seq: int, kind: str, ts: float, payload: bytes) -> bytes:
    """An event as a JSON object, splicing the stored payload bytes without re-parsing."""
    head = orjson.dumps({"seq": seq, "kind": kind, "ts": ts})
    return head[:-1] + b',"payload":' + bytes(payload) + b"}"


def _dumps(value: Mapping[str, Any]) -> bytes:
    try:
        return dumps_kept(value if type(value) is dict else dict(value))  # pending until written
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise StoreValidationError(f"payload is not JSON-serializable: {exc}") from exc
