"""Each model call rebuilt from a rollout's events (rolltap.exports.sent_requests): the
rule docs/events.md gives, on logs a gateway wrote and on logs cut short."""

from __future__ import annotations

import doctest
from typing import Any

import rolltap.events.prefix_digest
import rolltap.exports.sent
from rolltap.events import Event, EventKind, EventLog
from rolltap.exports import sent_requests
from rolltap.exports.sent import chain_digest
from rolltap.gateway.conversation import ConversationIndex
from rolltap.gateway.kept_params import KeptParams

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [{"name": "Bash", "description": "runs a command " * 100}]


def _message(i: int, *, marked: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": f"m{i}"}
    if marked:
        block["cache_control"] = dict(EPHEMERAL)
    return {"role": "user" if i % 2 == 0 else "assistant", "content": [block]}


def _log(dialect: str, calls: list[list[Any]]) -> list[Event]:
    """The request events a gateway's index and field check write for ``calls``."""
    index, kept, log = ConversationIndex(), KeptParams(), EventLog()
    for conversation in calls:
        match = index.match(conversation, dialect=dialect)
        payload = {
            "dialect": dialect, **match.fields(), "messages": conversation[match.length :],
            **kept.fields({"model": "m", "tools": TOOLS}),
        }  # fmt: skip
        log.append(EventKind.MODEL_REQUEST, payload)
        log.append(EventKind.NOTE, {"text": "between"})
    return list(log)


def test_the_doctests_hold() -> None:
    assert doctest.testmod(rolltap.exports.sent).failed == 0
    assert doctest.testmod(rolltap.events.prefix_digest).failed == 0


def test_a_moving_marker_rebuilds_as_sent_in_the_messages_dialect() -> None:
    calls = [
        [_message(0, marked=True)],
        [_message(0), _message(1), _message(2, marked=True)],
        [_message(0, marked=True), _message(1), _message(2), _message(3, marked=True)],
    ]
    events = _log("messages", calls)
    rebuilt = sent_requests(events)
    assert [c.messages for c in rebuilt] == calls
    assert [c.params for c in rebuilt] == [{"model": "m", "tools": TOOLS}] * 3
    assert [e.payload["prefix_messages"] for e in events if e.kind == "model_request"] == [0, 1, 3]
    assert [c.seq for c in rebuilt] == [0, 2, 4]


def test_a_marker_in_a_chat_prefix_is_content_and_kept() -> None:
    calls = [[_message(0, marked=True)], [_message(0, marked=True), _message(1)]]
    assert [c.messages for c in sent_requests(_log("chat", calls))] == calls


def test_a_prefix_not_among_the_events_read_is_none() -> None:
    events = _log("messages", [[_message(0)], [_message(0), _message(1)]])
    rebuilt = sent_requests(events[2:])  # the first request left out
    assert rebuilt[0].messages is None
    assert (rebuilt[0].params, rebuilt[0].unresolved) == ({"model": "m"}, ("tools",))
    assert sent_requests(events)[1].unresolved == ()


def test_chain_digest_is_the_prefix_digest_a_later_request_names() -> None:
    first = [_message(0, marked=True), _message(1)]
    events = _log("messages", [first, [*first, _message(2)]])
    assert events[2].payload["prefix_digest"] == chain_digest(first, "messages")


def test_a_payload_off_its_schema_is_not_rebuilt_and_the_others_are() -> None:
    events = _log("messages", [[_message(0)], [_message(0), _message(1)]])
    bad = dict(events[2].payload, prefix_cache_control="not marks")
    odd = Event(events[2].seq, events[2].kind, events[2].ts, bad)
    rebuilt = sent_requests([events[0], odd, events[2]])
    assert [c.messages for c in rebuilt] == [[_message(0)], None, [_message(0), _message(1)]]
