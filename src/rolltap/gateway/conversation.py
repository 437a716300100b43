"""Per-rollout conversation index: store each message of a growing conversation once.

A harness resends the whole conversation every turn. The index remembers every
conversation the rollout has sent; a new request is matched against them, and its event
keeps only the messages past the longest earlier conversation it extends, plus that
prefix's digest and length. :func:`conversation_of` finds the conversation in a request
body of any dialect.

A conversation is known by its messages written with sorted keys (``orjson``), so key
order does not matter, and prefixes are found by their bytes
(:mod:`~rolltap.gateway.conversation_dumps`). A relayed call already has the bytes its
harness wrote (the members of :class:`~rolltap.http.json_body.EncodedMembers`): a harness
resends its history byte for byte, so the index first looks those up as sent, and then
only the new messages are written sorted — the sorted key of the whole follows from the
prefix's kept hash state. A conversation with prompt-caching markers is remembered by the
bytes it will be resent as, its marked messages without them (an agent drops a marker
when it marks a newer message). One sent with other bytes (keys reordered) is looked up
by its sorted dump, as one without bytes is. Matching costs O(body) in C (a hash of
the bytes sent, XXH3: a few µs for a long history; a sorted dump and its SHA-256 only on
a miss) and O(new messages) in Python. The digest an
event names is a rolling SHA-256 over each message: it resumes from the prefix's state,
so only the new messages are written one by one. The harness validates only the
messages past a prefix that was validated in its dialect (:meth:`Found.validated`). In
the ``messages`` dialect messages are compared without the prompt-caching markers on
their content blocks, which an agent moves every turn (:mod:`rolltap.events.cache_marks`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from rolltap.events.cache_marks import MARKED_DIALECTS, Mark, marks_of, unmarked
from rolltap.events.prefix_digest import link
from rolltap.gateway.conversation_dumps import FAST, DumpIndex, DumpKey, Hash
from rolltap.gateway.conversation_found import (
    EMPTY,
    After,
    Found,
    Known,
    PrefixMatch,
    SentPrefix,
    identity,
)

__all__ = [
    "CONVERSATION_KEYS", "After", "ConversationIndex", "Found", "PrefixMatch", "SentPrefix",
    "conversation_digest", "conversation_of",
]  # fmt: skip

#: where each dialect keeps the conversation in a request body
CONVERSATION_KEYS: Mapping[str, str] = {
    "chat": "messages",
    "messages": "messages",
    "responses": "input",
}

_SORTED = orjson.OPT_SORT_KEYS
#: hash states kept (the conversations last remembered or extended): a branch from
#: another rebuilds its rolling digest from the start, and is looked up sorted
_STATES = 8


@dataclass(slots=True)
class ConversationIndex:
    #: known conversations by their sorted dumps (SHA-256: a key is the conversation's
    #: identity), and by the bytes they were sent as (a fast hash: a hit's identity is
    #: its sorted key's, resumed from the prefix's state)
    _sorted: DumpIndex[Known] = field(default_factory=DumpIndex)
    _sent: DumpIndex[Known] = field(default_factory=lambda: DumpIndex(FAST))
    #: the conversations whose hash states are kept, least recently used first
    _recent: dict[int, Known] = field(default_factory=dict)
    _generation: int = 0

    def find(
        self, messages: list[Any], *, dialect: str = "", sent: bytes | memoryview | None = None
    ) -> Found:
        """The longest known conversation that ``messages`` (in ``dialect``) extends
        (nothing remembered). ``sent``: the JSON text the harness wrote ``messages`` as
        (a relayed call's member), looked up first.

        Looked up by their sorted dump, in a marked dialect the messages are first taken
        with their markers: a prefix found so has none (a conversation is known without
        them), so only the messages past it are searched for markers, and looked up
        again without them only where one sits before the last message (it may hide a
        longer prefix)."""
        if not messages:
            return Found(messages, messages, [], None, self._generation)
        if sent is not None:
            found = self._as_sent(messages, dialect, sent)
            if found is not None:
                return found
        try:
            dump = orjson.dumps(messages, option=_SORTED)
        except orjson.JSONEncodeError:  # nested too deep: validation answers it
            return Found(messages, messages, [], None, self._generation)
        hit = self._sorted.longest(dump)
        # a prefix found with the markers, of a conversation known without them, has none
        start = hit[0].length if hit is not None and hit[0].dialect in MARKED_DIALECTS else 0
        marks = marks_of(messages, start) if dialect in MARKED_DIALECTS else []
        canonical = messages
        if marks and (hit is None or not start or marks[0][0] != len(messages) - 1):
            # looked up again without them
            canonical = unmarked(messages, marks)
            dump = orjson.dumps(canonical, option=_SORTED)
            hit = self._sorted.longest(dump)
        elif marks and hit is not None:  # the new messages' markers taken off their bytes
            canonical = unmarked(messages, marks)
            tail = orjson.dumps(canonical[hit[0].length :], option=_SORTED)
            dump = dump[: hit[1] - 1] + b"," + tail[1:]
        known, size, head = (None, 1, None) if hit is None else hit
        key, open_ = self._sorted.key(dump, head, size - 1)  # past a prefix, only its bytes
        as_sent = None if sent is None else self._resent_key(sent, messages, canonical, marks)
        return Found(messages, canonical, marks, known, self._generation, key, open_, as_sent)

    def _as_sent(self, messages: list[Any], dialect: str, sent: bytes | memoryview) -> Found | None:
        """``messages`` found by the bytes they were sent as, extending a conversation
        sent before in the same dialect; None where the sorted lookup must decide."""
        prefix = self.sent_prefix(sent, dialect)
        after = None if prefix is None else self.after(prefix, messages, sent)
        return None if after is None else self.found_after(after)

    def sent_prefix(self, sent: bytes | memoryview, dialect: str) -> SentPrefix | None:
        """The longest conversation sent before in ``dialect`` whose bytes ``sent`` (the
        bytes of a conversation, or of a body from its conversation's ``[`` on) begin
        with, up to an element's end; None if there is none."""
        hit = self._sent.longest(sent)
        if hit is None or hit[0].dialect != dialect:
            return None
        known, size, head = hit
        return SentPrefix(known, size, head, known.state, known.open)

    def after(
        self, prefix: SentPrefix, messages: list[Any], sent: bytes | memoryview,
        *, skipped: int = 0,
    ) -> After | None:  # fmt: skip
        """``messages`` (the conversation's past its first ``skipped``: a body read past
        ``prefix``, its messages never parsed), sent as ``sent``, made ready to be found
        past ``prefix`` (:meth:`found_after`, which cannot fail then); None where they
        cannot be (the prefix's hash states let go, a message that cannot be written)."""
        past = prefix.known.length - skipped  # where the prefix ends in ``messages``
        if skipped and prefix.chain is None:
            return None  # the rolling digest could not go on
        marks = marks_of(messages, past) if prefix.known.dialect in MARKED_DIALECTS else []
        canonical = unmarked(messages, marks) if marks else messages
        if marks and skipped:  # numbered in the whole conversation
            marks = [(i + skipped, j, v) for i, j, v in marks]
        more = None
        if len(messages) > past:
            if prefix.open is None:
                return None  # its state let go: written sorted again
            try:
                more = orjson.dumps(canonical[past:], option=_SORTED)
            except orjson.JSONEncodeError:
                return None
        return After(prefix, messages, skipped, canonical, marks, more, sent)

    def found_after(self, after: After) -> Found:
        """What :meth:`after` made ready, found: the key of the whole extended from the
        prefix's (only the messages past it written sorted and hashed)."""
        prefix = after.prefix
        known, key, open_ = prefix.known, prefix.known.key, prefix.open
        if after.more is not None and prefix.open is not None:
            key, open_ = known.key.extended(prefix.open, after.more)
            # one known only sorted (sent with other bytes, or hidden by a marker) may
            # reach further
            known = self._sorted.longest_past(known.key, prefix.open, after.more) or known
        as_sent = self._resent_key(
            after.sent, after.messages, after.canonical, after.marks, prefix.head,
            prefix.size - 1, after.skipped,
        )  # fmt: skip
        return Found(
            after.messages, after.canonical, after.marks, known, self._generation, key, open_,
            as_sent, after.skipped, prefix.chain if after.skipped else None,
        )  # fmt: skip

    def remember(self, found: Found, dialect: str) -> PrefixMatch:
        """Remember ``found``'s conversation (validated in ``dialect``); its prefix match."""
        if found.generation != self._generation and not found.skipped:
            # another call remembered one meanwhile (a body read past its prefix keeps
            # the prefix it was read past: still known, if maybe no longer the longest)
            found = self.find(found.messages, dialect=dialect)
        messages, key, known, skipped = found.canonical, found.key, found.known, found.skipped
        length = skipped + len(messages)
        if key is None or (known is not None and known.length == length):
            return found.match
        state, start = self._chain(found)
        for i in range(start, length):
            state.update(link(messages[i - skipped]))
            if known is not None and i + 1 == known.length:
                known.state = state.copy()  # rebuilt: the prefix may be branched from again
        if known is not None:
            self._keep(known)
        marks = tuple(found.marks)
        new = Known(length, state.digest(), dialect, marks, key, state, found.open)
        self._sorted.add(key, new)
        if found.sent is not None:
            self._sent.add(found.sent, new)
        self._keep(new)
        self._generation += 1
        return found.match

    @staticmethod
    def _chain(found: Found) -> tuple[Hash, int]:
        """The rolling digest's state to extend ``found``'s from, and its messages."""
        known = found.known
        if known is not None and known.state is not None:
            return known.state.copy(), known.length
        if found.chain is not None:
            return found.chain.copy(), found.skipped
        return hashlib.sha256(), 0

    def match(
        self, messages: list[Any], *, remember: bool = True, dialect: str = ""
    ) -> PrefixMatch:
        """Find the longest known conversation that ``messages`` extends, then remember it
        (unless ``remember`` is false: a token count is not part of the conversation)."""
        found = self.find(messages, dialect=dialect)
        return self.remember(found, dialect) if remember else found.match

    def _keep(self, known: Known) -> None:
        """Keep ``known``'s hash states as the most recently used; drop the oldest's."""
        recent = self._recent
        recent.pop(id(known), None)
        recent[id(known)] = known
        if len(recent) > _STATES:
            oldest = recent.pop(next(iter(recent)))
            oldest.state = oldest.open = None

    def __len__(self) -> int:
        return len(self._sorted)

    def _resent_key(
        self, sent: bytes | memoryview, messages: list[Any], canonical: list[Any],
        marks: list[Mark], head: Hash | None = None, start: int = 0, skipped: int = 0,
    ) -> DumpKey | None:  # fmt: skip
        """The key of the bytes ``messages``, sent as ``sent``, are sent as again next turn:
        ``sent`` itself, or, where prompt-caching markers sit (which an agent moves), ``sent``
        with the marked messages written without them (an agent that drops a marker resends
        the rest byte for byte). None where the marked messages do not end ``sent`` as orjson
        writes them. ``head``: a state over ``sent[:start]``, taken over; ``messages``
        are those past ``skipped``."""
        if not marks:
            return self._sent.key(sent, head, start)[0]
        first = marks[0][0] - skipped
        try:
            marked, plain = orjson.dumps(messages[first:]), orjson.dumps(canonical[first:])
        except orjson.JSONEncodeError:
            return None
        view = memoryview(sent)
        cut = len(view) - len(marked) + 1  # where the first marked message begins
        if cut <= start or view[cut - 1] not in b",[" or view[cut:] != marked[1:]:
            return None
        return self._sent.key(view[:cut].tobytes() + plain[1:], head, start)[0]


def conversation_digest(messages: list[Any], dialect: str = "") -> bytes:
    """The identity :meth:`ConversationIndex.find` gives ``messages`` in ``dialect``
    (:attr:`Found.identity`), without an index."""
    if not messages:
        return EMPTY
    marks = marks_of(messages) if dialect in MARKED_DIALECTS else []
    try:
        dump = orjson.dumps(unmarked(messages, marks) if marks else messages, option=_SORTED)
    except orjson.JSONEncodeError:
        return EMPTY
    return identity(hashlib.sha256(dump).digest(), marks)


def conversation_of(dialect: str, body: Mapping[str, Any]) -> list[Any]:
    """The request's conversation as a list (a Responses string input is one user turn)."""
    value = body.get(CONVERSATION_KEYS[dialect])
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []
