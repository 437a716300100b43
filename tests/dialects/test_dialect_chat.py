"""SSE framing and the chat dialect's pieces that need no network."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from rolltap.dialects.sse import SSESplitter
from rolltap.gateway.answer_record import ChatStreamAccumulator
from rolltap.gateway.conversation import ConversationIndex

EVENTS = [b'data: {"a": 1}\n\n', b": keepalive\n\n", b"event: x\ndata: y\n\n", b"data: [DONE]\n\n"]


@given(st.lists(st.integers(min_value=1, max_value=len(b"".join(EVENTS)) - 1), max_size=6))
def test_sse_splitter_keeps_bytes_whatever_the_chunking(cuts: list[int]) -> None:
    stream = b"".join(EVENTS)
    points = sorted(set(cuts))
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    splitter = SSESplitter()
    out = [e for chunk in chunks for e in splitter.feed(chunk)]
    assert [e.raw for e in out] == EVENTS
    assert [e.data for e in out] == [b'{"a": 1}', None, b"y", b"[DONE]"]
    assert out[2].event == b"x"
    assert splitter.pending == b""


def test_conversation_index_finds_the_longest_earlier_conversation() -> None:
    index = ConversationIndex()
    a = [{"role": "user", "content": "1"}]
    b = [*a, {"role": "assistant", "content": "2"}, {"role": "user", "content": "3"}]
    assert index.match(a).length == 0
    match = index.match(b)
    assert match.length == 1 and match.digest is not None
    assert index.match([*b, {"role": "user", "content": "4"}]).length == 3
    # key order inside a message does not matter
    assert index.match([{"content": "1", "role": "user"}]).length == 1
    assert index.match([{"role": "user", "content": "other"}]).length == 0


def test_accumulator_folds_parallel_tool_calls_and_logprobs() -> None:
    acc = ChatStreamAccumulator()
    chunks = [
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "t0", "function": {"name": "f", "arguments": '{"x"'}},
            {"index": 1, "id": "t1", "function": {"name": "g", "arguments": "{}"}},
        ]}, "logprobs": {"content": [{"token": "a", "logprob": -0.1}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
    ]  # fmt: skip
    for chunk in chunks:
        acc.add(orjson.loads(orjson.dumps(chunk)))
    body = acc.body()
    choice = body["choices"][0]
    calls = choice["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"x": 1}', "{}"]
    assert [c["id"] for c in calls] == ["t0", "t1"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["logprobs"]["content"][0]["token"] == "a"
    assert body["usage"]["completion_tokens"] == 4 and acc.chunks == 4


SORTED = orjson.OPT_SORT_KEYS


def test_conversation_index_matches_as_a_walk_of_every_prefix_would() -> None:
    """Longest earlier conversation first, across branches, duplicates and sizes whose
    bytes end alike; the digest of a prefix is the same whichever way it was reached."""
    index = ConversationIndex()
    u = [{"role": "user", "content": str(i)} for i in range(6)]
    assert index.match(u[:2]).length == 0
    assert index.match([u[0], u[3]]).length == 0  # a branch from nothing known
    first = index.match(u[:4])
    assert first.length == 2
    assert index.match(u[:4]).length == 4  # the same conversation again
    assert index.match([u[0], u[3], u[4]]).length == 2  # the branch extended
    assert index.match(u[:2]).digest == first.digest
    for _ in range(10):  # older digest states are dropped: rebuilt from the start
        index.match([{"role": "user", "content": "x" * 40}, *u])
    assert index.match([*u[:4], u[5]]).length == 4
    assert index.match([*u[:4], u[5]]).digest == index.match([*u[:4], u[5], u[0]]).digest
    found = index.find([*u[:2], {"role": "assistant", "content": [1, 2]}])
    assert (found.match.length, found.validated("chat"), found.validated("")) == (2, 0, 2)


def _reference_match(seen: dict[bytes, int], messages: list[Any]) -> tuple[int, str | None]:
    """The index before it skipped prefixes: a rolling digest of every message."""
    h, digest = hashlib.sha256(), b""
    best: tuple[int, str | None] = (0, None)
    for i, message in enumerate(messages, start=1):
        h.update(orjson.dumps(message, option=orjson.OPT_SORT_KEYS) + b"\x1e")
        digest = h.digest()
        if digest in seen:
            best = (i, digest.hex())
    if messages:
        seen[digest] = len(messages)
    return best


_MESSAGES = st.sampled_from(
    [{"role": "user", "content": c} for c in ("a", "b", ",", "]", "a,b", "[x]")]
    + [{"content": "a", "role": "user"}, {"role": "assistant", "content": None}]
)


@given(st.lists(st.tuples(st.lists(_MESSAGES, max_size=6), st.booleans()), max_size=12))
def test_conversation_index_agrees_with_walking_every_prefix(
    convos: list[tuple[list[Any], bool]],
) -> None:
    """Each conversation looked up by its messages, or (``as_sent``) first by the bytes
    it was sent as: keys reordered, the same conversation sent both ways, branches."""
    index, seen = ConversationIndex(), dict[bytes, int]()
    for convo, as_sent in convos:
        found = index.find(convo, sent=orjson.dumps(convo) if as_sent else None)
        match = index.remember(found, "")
        assert (match.length, match.digest) == _reference_match(seen, convo)
        if convo:
            assert found.digest == hashlib.sha256(orjson.dumps(convo, option=SORTED)).digest()


def test_a_conversation_is_looked_up_by_the_bytes_it_was_sent_as_first() -> None:
    """A relay's bytes are trusted to be the messages' own (they were written from
    them): a prefix found by them needs no sorted dump of it. Given bytes that are not
    the messages' (never done), what they name wins — which shows they are read."""
    index = ConversationIndex()
    u = [{"role": "user", "content": str(i)} for i in range(4)]
    index.remember(index.find(u[:2], sent=orjson.dumps(u[:2])), "")
    other = [{"role": "user", "content": "x"}, u[1], u[2]]
    assert index.find(other).match.length == 0
    assert index.find(other, sent=orjson.dumps(u[:3])).match.length == 2
    reordered = [{"content": m["content"], "role": m["role"]} for m in u[:3]]
    assert index.find(reordered, sent=orjson.dumps(reordered)).match.length == 2
    for i in range(10):  # u[:2]'s hash states let go: a resend needs none
        index.match([{"role": "user", "content": f"other {i}"}])
    resent = index.find(other[:2], sent=orjson.dumps(u[:2]))
    assert (resent.match.length, resent.digest) == (2, index.find(u[:2]).digest)
