"""Prompt-caching markers moved turn to turn: the conversation index still finds the prefix,
and the prefix's markers as sent are kept (rolltap.events.cache_marks)."""

from __future__ import annotations

import copy
import doctest
import hashlib
import random
from typing import Any

import orjson
import pytest

import rolltap.events.cache_marks
from rolltap.events.cache_marks import marks_of, unmarked, with_marks
from rolltap.gateway.conversation import ConversationIndex, conversation_digest

EPHEMERAL = {"type": "ephemeral"}
SORTED = orjson.OPT_SORT_KEYS


def _text(text: str, marked: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marked:
        block["cache_control"] = dict(EPHEMERAL)
    return block


def _turns(n: int, marked: int | None) -> list[dict[str, Any]]:
    """``n`` messages, user and assistant in turn, the message ``marked`` marked on its
    last block (as Claude Code marks its last message)."""
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append({"role": role, "content": [_text(f"a{i}"), _text(f"b{i}", i == marked)]})
    return out


def test_the_doctests_hold() -> None:
    assert doctest.testmod(rolltap.events.cache_marks).failed == 0


def test_only_blocks_of_a_message_s_own_content_are_marks() -> None:
    nested: dict[str, Any] = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [_text("deep", True)]},
            {"type": "tool_use", "id": "u", "name": "f", "input": {"cache_control": 1}},
            _text("top", True),
        ],
    }
    messages: list[Any] = [
        {"role": "user", "content": "a string has no blocks"},
        nested,
        "not a message",
    ]
    marks = marks_of(messages)
    assert marks == [(1, 2, EPHEMERAL)]
    out = unmarked(messages, marks)
    assert out[1]["content"][2] == _text("top")
    assert out[1]["content"][:2] == nested["content"][:2]  # the deeper ones are content
    assert messages[1]["content"][2] == _text("top", True)  # the messages sent are untouched
    assert out[0] is messages[0]


def test_with_marks_takes_the_recorded_markers_off_and_sets_the_sent_ones() -> None:
    recorded = _turns(4, marked=3)
    sent = _turns(4, marked=1)
    assert with_marks(recorded, marks_of(sent)) == sent
    assert with_marks(recorded, []) == _turns(4, marked=None)
    assert recorded == _turns(4, marked=3)  # copies what it changes


def test_a_moved_marker_still_extends_the_last_turn_and_names_the_prefix_s_markers() -> None:
    index = ConversationIndex()
    first = index.match(_turns(2, marked=1), dialect="messages")
    assert first.length == 0
    second = index.match(_turns(4, marked=3), dialect="messages")
    # the marker moved from message 1 to message 3: the first two are the prefix, and
    # they were sent unmarked this time
    assert (second.length, second.marks) == (2, ())
    assert second.fields() == {"prefix_digest": second.digest, "prefix_messages": 2}
    third = index.match(_turns(6, marked=1), dialect="messages")
    assert (third.length, third.marks) == (4, ((1, 1, EPHEMERAL),))
    assert third.fields()["prefix_cache_control"] == [[1, 1, EPHEMERAL]]


def test_the_prefix_digest_is_the_same_with_markers_anywhere() -> None:
    plain, moved = ConversationIndex(), ConversationIndex()
    plain.match(_turns(2, marked=None), dialect="messages")
    moved.match(_turns(2, marked=0), dialect="messages")
    a = plain.match(_turns(4, marked=None), dialect="messages")
    b = moved.match(_turns(4, marked=3), dialect="messages")
    assert (a.length, a.digest) == (b.length, b.digest)


def test_outside_the_messages_dialect_a_marker_is_content() -> None:
    index = ConversationIndex()
    index.match(_turns(2, marked=1), dialect="chat")
    assert index.match(_turns(4, marked=3), dialect="chat").length == 0


def test_a_change_beside_a_marker_is_no_prefix() -> None:
    index = ConversationIndex()
    index.match(_turns(2, marked=1), dialect="messages")
    edited = _turns(4, marked=3)
    edited[1]["content"][1]["text"] = "edited"
    assert index.match(edited, dialect="messages").length == 0


def test_the_identity_tells_markers_apart_and_the_digest_does_not() -> None:
    index = ConversationIndex()
    a = index.find(_turns(4, marked=3), dialect="messages")
    b = index.find(_turns(4, marked=1), dialect="messages")
    assert a.digest == b.digest
    assert a.identity != b.identity
    assert a.identity == conversation_digest(_turns(4, marked=3), "messages")
    plain = _turns(4, marked=None)
    assert index.find(plain, dialect="messages").identity == conversation_digest(plain)


def test_validation_is_skipped_only_up_to_the_first_changed_marker() -> None:
    index = ConversationIndex()
    index.match(_turns(4, marked=3), dialect="messages")
    again = index.find(_turns(6, marked=5), dialect="messages")
    assert again.validated("messages") == 3  # message 3 lost its marker
    index.match(_turns(6, marked=5), dialect="messages")
    same = _turns(8, marked=7)
    same[5]["content"][1]["cache_control"] = dict(EPHEMERAL)  # kept where it was
    assert index.find(same, dialect="messages").validated("messages") == 6
    changed = copy.deepcopy(same)
    changed[5]["content"][1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    assert index.find(changed, dialect="messages").validated("messages") == 5
    assert index.find(changed, dialect="messages").validated("chat") == 0


def _reference(remembered: list[list[Any]], canonical: list[Any]) -> int:
    """The longest remembered conversation (markers off) that ``canonical`` extends."""
    fits = [len(c) for c in remembered if len(c) <= len(canonical) and canonical[: len(c)] == c]
    return max(fits, default=0)


@pytest.mark.parametrize("as_sent", [False, True], ids=["objects", "bytes-as-sent"])
@pytest.mark.parametrize("seed", range(20))
def test_the_prefix_found_is_the_longest_without_markers(seed: int, as_sent: bool) -> None:
    """Random walks of a conversation — turns added, branches back, markers moved, kept,
    added mid-history — against a reference that compares messages without markers. The
    index may miss only a whole-conversation match hidden by the last message's marker.
    ``as_sent``: each lookup is given the bytes the messages were sent as (a relay's)."""
    rng = random.Random(seed)
    index, remembered = ConversationIndex(), list[list[Any]]()
    plain: list[Any] = _turns(2, marked=None)
    for _ in range(30):
        step = rng.random()
        if step < 0.2 and len(plain) > 2:
            plain = plain[: rng.randrange(2, len(plain))]  # a branch back
        elif step < 0.9:
            plain = plain + _turns(rng.randrange(1, 3), marked=None)
        sent = copy.deepcopy(plain)
        for i in rng.sample(range(len(sent)), k=min(len(sent), rng.randrange(0, 3))):
            sent[i]["content"][-1]["cache_control"] = {"type": "ephemeral", "n": rng.randrange(2)}
        want = _reference(remembered, plain)
        found = index.find(sent, dialect="messages", sent=orjson.dumps(sent) if as_sent else None)
        got = found.match.length
        assert found.digest == hashlib.sha256(orjson.dumps(plain, option=SORTED)).digest()
        if got != want:
            assert want == len(sent) and marks_of(sent)[-1][0] == len(sent) - 1, (got, want)
        assert found.canonical == plain
        assert found.identity == conversation_digest(sent, "messages")
        assert with_marks(plain[:got], list(found.match.marks)) == sent[:got]
        chain = hashlib.sha256()
        for message in plain[:got]:
            chain.update(orjson.dumps(message, option=orjson.OPT_SORT_KEYS) + b"\x1e")
        assert found.match.digest == (chain.hexdigest() if got else None)
        index.remember(found, "messages")
        remembered.append(plain)


def test_a_moved_marker_still_finds_the_prefix_by_the_bytes_sent() -> None:
    """Claude Code's turn: the marker on the last message dropped, a new last one marked.
    The conversation was remembered by the bytes it will be resent as (its marked
    message written without the marker), so the next turn is found by its bytes; other
    messages under those bytes show that the bytes are what is read."""
    index = ConversationIndex()
    first = _turns(4, marked=3)
    index.remember(index.find(first, dialect="messages", sent=orjson.dumps(first)), "messages")
    turn = _turns(6, marked=5)
    found = index.find(turn, dialect="messages", sent=orjson.dumps(turn))
    assert (found.match.length, found.canonical) == (4, _turns(6, marked=None))
    other = _turns(6, marked=5)
    other[0]["content"][0]["text"] = "never sent"
    assert index.find(other, dialect="messages").match.length == 0
    assert index.find(other, dialect="messages", sent=orjson.dumps(turn)).match.length == 4
    spaced = ConversationIndex()  # JSON not written as orjson writes it: found sorted
    sent = orjson.dumps(first).replace(b",", b", ")
    assert orjson.loads(sent) == first
    spaced.remember(spaced.find(first, dialect="messages", sent=sent), "messages")
    again = orjson.dumps(turn).replace(b",", b", ")
    assert spaced.find(turn, dialect="messages", sent=again).match.length == 4
