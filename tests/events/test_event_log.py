"""The in-memory event log on its own (rolltap.events): dense sequence numbers, and the
snapshot a store uses to tell an extension of what it persisted from a rewritten history."""

from __future__ import annotations

import pytest

from rolltap.events import Event, EventKind, EventLog


def _log(n: int) -> EventLog:
    log = EventLog()
    for i in range(n):
        log.append(EventKind.NOTE, {"i": i}, ts=float(i))
    return log


def test_appends_number_events_densely_from_zero() -> None:
    log = _log(3)
    assert [e.seq for e in log] == [0, 1, 2]
    assert log[1] == Event(1, "note", 1.0, {"i": 1})
    assert [e.seq for e in log.since(1)] == [1, 2]


def test_from_events_refuses_a_gap() -> None:
    with pytest.raises(ValueError, match="seq 2 at position 1"):
        EventLog.from_events([Event(0, "note", 0.0, {}), Event(2, "note", 0.0, {})])


def test_an_extension_of_the_persisted_prefix_is_not_a_replace() -> None:
    log = _log(3)
    log.mark_persisted(log.snapshot(0).epoch)
    log.append(EventKind.NOTE, {})
    snap = log.snapshot(3)
    assert (snap.length, snap.changed_from, snap.replace) == (4, 3, False)


def test_a_cut_below_the_prefix_is_remembered_after_the_log_grows_again() -> None:
    log = _log(3)
    log.mark_persisted(log.snapshot(0).epoch)
    log.truncate(1)
    for _ in range(4):
        log.append(EventKind.NOTE, {})
    snap = log.snapshot(3)
    assert (snap.length, snap.changed_from, snap.replace) == (5, 1, True)


def test_a_cut_made_while_a_write_is_in_flight_survives_its_mark() -> None:
    log = _log(3)
    in_flight = log.snapshot(0)  # a write of these 3 events starts
    log.truncate(2)  # history is cut meanwhile
    log.mark_persisted(in_flight.epoch)  # the write lands
    assert log.rewound_below(3)
    log.mark_persisted()
    assert not log.rewound_below(3)


def test_release_empties_durable_requests_and_whole_reads_them_back() -> None:
    log = EventLog()
    stored = [
        log.append(EventKind.MODEL_REQUEST, {"messages": [{"role": "user", "content": "a"}]}),
        log.append(EventKind.MODEL_RESPONSE, {"status": 200}),
        log.append(EventKind.MODEL_REQUEST, {"messages": [], "stream": True}),
    ]
    log.release(2)  # only what a store holds: the third is not durable yet
    assert log.released == 2
    assert log[0].payload == {"released": True} and log[1] == stored[1]
    assert log[2] == stored[2]
    assert log.whole(stored) == stored
    with pytest.raises(ValueError, match="1 events stored, 2 released"):
        log.whole(stored[:1])
    log.release(1)  # never lower
    assert log.released == 2
    log.truncate(1)  # history cut below: what is left was released up to the cut
    assert log.released == 1 and log.whole(stored) == stored[:1]
