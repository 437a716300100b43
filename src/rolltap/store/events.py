"""The event model and the in-memory, append-only per-rollout event log.

A rollout's history is a list of :class:`Event` s with a per-session sequence number
(0-based, dense), a kind, a wall-clock timestamp and a JSON payload. The kinds and
their payloads are documented in ``docs/events.md`` under :data:`FORMAT_VERSION`.

>>> log = EventLog()
>>> log.append(EventKind.STATUS, {"status": "running"}).seq
0
>>> len(log)
1
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, overload

__all__ = ["FORMAT_VERSION", "Event", "EventKind", "EventLog"]

#: version of the event payload format; bumped on any incompatible payload change
FORMAT_VERSION = 1


class EventKind(StrEnum):
    """What an event records. Payload fields per kind are documented in docs/events.md."""

    MODEL_REQUEST = "model_request"
    MODEL_RESPONSE = "model_response"
    MODEL_ERROR = "model_error"
    HARNESS_OUTPUT = "harness_output"
    REWARD = "reward"
    STATUS = "status"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Event:
    """One immutable entry in a rollout's history."""

    seq: int
    kind: str
    ts: float
    payload: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "ts": self.ts, "payload": self.payload}


@dataclass(slots=True)
class EventLog:
    """An append-only list of events for one rollout.

    Appends are the normal path. :meth:`truncate` rolls history back to its first ``n``
    events (e.g. a rollout resumed from an earlier point); the log remembers the lowest
    length it was cut to since the last :meth:`mark_persisted`, so a store can tell an
    extension of the persisted prefix from a rewritten history even when the log has
    grown past the old prefix again.
    """

    _events: list[Event] = field(default_factory=list)
    _low_water: int | None = None

    def append(self, kind: str, payload: Mapping[str, Any], *, ts: float | None = None) -> Event:
        event = Event(
            seq=len(self._events),
            kind=str(kind),
            ts=time.time() if ts is None else ts,
            payload=payload,
        )
        self._events.append(event)
        return event

    def truncate(self, n: int) -> None:
        """Keep only the first ``n`` events."""
        if n < 0:
            raise ValueError("n must be >= 0")
        if n >= len(self._events):
            return
        del self._events[n:]
        self._low_water = n if self._low_water is None else min(self._low_water, n)

    def rewound_below(self, prefix: int) -> bool:
        """True if history was cut below ``prefix`` events since the last mark."""
        return self._low_water is not None and self._low_water < prefix

    def mark_persisted(self) -> None:
        """Forget past truncations: the store has just written the whole current history."""
        self._low_water = None

    def since(self, start: int) -> list[Event]:
        return self._events[start:]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        return self._events[index]
