"""The in-memory, append-only per-rollout event log.

>>> log = EventLog()
>>> log.append(EventKind.STATUS, {"status": "running"}).seq
0
>>> len(log)
1
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from rolltap.events.model import Event, EventKind

__all__ = ["EventLog", "LogSnapshot"]


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """What a store must write to bring its persisted copy of a log up to date.

    ``changed_from`` is the first position whose persisted content may differ from the
    log: equal to the ``prefix`` passed to :meth:`EventLog.snapshot` for a pure
    extension, lower when history was cut below the prefix since the last
    :meth:`EventLog.mark_persisted`. ``epoch`` is handed back to ``mark_persisted`` once
    the write is durable, so truncations made while the write was in flight are kept.
    """

    length: int
    prefix: int
    changed_from: int
    epoch: int

    @property
    def replace(self) -> bool:
        """True when the persisted history must be replaced rather than extended."""
        return self.changed_from < self.prefix


@dataclass(slots=True)
class EventLog:
    """An append-only list of events for one rollout.

    Appends are the normal path. :meth:`truncate` rolls history back to its first ``n``
    events (e.g. a rollout resumed from an earlier point); the log remembers the lowest
    length it was cut to since the last :meth:`mark_persisted`, so a store can tell an
    extension of the persisted prefix from a rewritten history even when the log has
    grown past the old prefix again.

    >>> log = EventLog()
    >>> for i in range(3):
    ...     _ = log.append(EventKind.NOTE, {"text": str(i)})
    >>> snap = log.snapshot(0)
    >>> log.mark_persisted(snap.epoch)
    >>> log.truncate(1)
    >>> log.snapshot(3).replace
    True
    """

    _events: list[Event] = field(default_factory=list)
    # the first events whose bulk was dropped once durable (:meth:`release`)
    _released: int = 0
    # (epoch, cut length) of truncations not yet persisted, cut lengths strictly
    # increasing with epoch: an older cut at or above a newer one can never be the
    # lowest cut of any suffix, so it is dropped.
    _cuts: list[tuple[int, int]] = field(default_factory=list)
    _epoch: int = 0

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> EventLog:
        """A log holding ``events`` (seqs must be 0, 1, 2, ...), treated as persisted."""
        log = cls()
        for i, event in enumerate(events):
            if event.seq != i:
                raise ValueError(f"event seq {event.seq} at position {i}")
            log._events.append(event)
        return log

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
        self._released = min(self._released, n)
        self._epoch += 1
        while self._cuts and self._cuts[-1][1] >= n:
            self._cuts.pop()
        self._cuts.append((self._epoch, n))

    @property
    def epoch(self) -> int:
        """How many truncations this log has seen; pass it to :meth:`mark_persisted`."""
        return self._epoch

    def rewound_below(self, prefix: int) -> bool:
        """True if history was cut below ``prefix`` events since the last mark."""
        return bool(self._cuts) and self._cuts[0][1] < prefix

    def snapshot(self, prefix: int) -> LogSnapshot:
        """Compare the log with a persisted copy of its first ``prefix`` events.

        A log shorter than ``prefix`` without a recorded cut (e.g. a fresh log for a
        stored session) is treated as rewritten from position 0.
        """
        length = len(self._events)
        changed = prefix
        if self._cuts:
            changed = min(changed, self._cuts[0][1])
        if length < changed:
            changed = 0
        return LogSnapshot(length=length, prefix=prefix, changed_from=changed, epoch=self._epoch)

    def mark_persisted(self, epoch: int | None = None) -> None:
        """Forget truncations up to ``epoch`` (all when None): the store has written them.

        A store that snapshots, writes asynchronously, then marks passes the
        snapshot's epoch so that a truncation made during the write is remembered.
        """
        if epoch is None:
            self._cuts.clear()
        else:
            self._cuts = [cut for cut in self._cuts if cut[0] > epoch]

    @property
    def released(self) -> int:
        """How many leading events :meth:`release` emptied (0: the log is whole)."""
        return self._released

    def release(self, upto: int) -> None:
        """Drop from memory the messages the first ``upto`` ``model_request`` events
        recorded — what grows with an agent's history — once a store holds them durably;
        each keeps its other fields and says ``"released": true``. A reader that needs
        them takes them from the store (:meth:`whole`).

        >>> log = EventLog()
        >>> _ = log.append(EventKind.MODEL_REQUEST, {"messages": ["…"], "stream": False})
        >>> log.release(1)
        >>> log[0].payload, log.released
        ({'stream': False, 'released': True}, 1)
        """
        upto = min(upto, len(self._events))
        for i in range(self._released, upto):
            event = self._events[i]
            if event.kind == EventKind.MODEL_REQUEST and "messages" in event.payload:
                kept = {k: v for k, v in event.payload.items() if k != "messages"}
                self._events[i] = Event(event.seq, event.kind, event.ts, {**kept, "released": True})
        self._released = max(self._released, upto)

    def whole(self, persisted: Sequence[Event]) -> list[Event]:
        """Every event, the released ones taken from ``persisted`` (the store's copy of
        the history, in order)."""
        if len(persisted) < self._released:
            raise ValueError(f"{len(persisted)} events stored, {self._released} released")
        return [*persisted[: self._released], *self._events[self._released :]]

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
