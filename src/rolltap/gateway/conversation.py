"""Per-rollout conversation index: store each message of a growing conversation once.

A harness resends the whole conversation every turn. The index remembers every
conversation the rollout has sent; a new request is matched against them, and its event
keeps only the messages past the longest earlier conversation it extends, plus that
prefix's digest and length. :func:`conversation_of` finds the conversation in a request
body of any dialect.

Matching costs O(body) in C and O(new messages) in Python: the conversation is
serialized once (``orjson``, sorted keys, so key order does not matter) and an earlier
conversation of ``L`` bytes is a prefix exactly when the first ``L - 1`` bytes agree and
the next one ends an array element. Candidates are tried longest first, filtered by
that byte and their last bytes before a prefix is hashed. The digest an event names is a
rolling SHA-256 over each message: it resumes from the prefix's state, so only the new
messages are serialized one by one. The harness validates only the messages past a
prefix that was validated in its dialect (:meth:`Found.validated`). In the ``messages``
dialect messages are compared without the prompt-caching markers on their content blocks,
which an agent moves every turn (:mod:`rolltap.events.cache_marks`).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from rolltap.events.cache_marks import MARKED_DIALECTS, Mark, marks_of, unmarked
from rolltap.events.jsonbytes import dumps_kept
from rolltap.events.prefix_digest import link

__all__ = [
    "CONVERSATION_KEYS", "ConversationIndex", "Found", "PrefixMatch", "conversation_digest",
    "conversation_of",
]  # fmt: skip

#: where each dialect keeps the conversation in a request body
CONVERSATION_KEYS: Mapping[str, str] = {
    "chat": "messages",
    "messages": "messages",
    "responses": "input",
}

_SORTED = orjson.OPT_SORT_KEYS
_TAIL = 16  # bytes before a prefix's end compared before it is hashed
_ENDS = frozenset(b",]")
#: rolling-digest states kept (the conversations last remembered or extended): a branch
#: from another rebuilds its state from the start
_STATES = 8
_EMPTY = hashlib.sha256(b"").digest()
_NONE = object()  # no marker there


class _Hash(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...
    def digest(self) -> bytes: ...
    def copy(self) -> _Hash: ...


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """``length`` leading messages were seen before (digest ``digest``); the rest are new.
    ``marks``: the prefix's prompt-caching markers as sent, which may differ from those
    it was recorded with (:mod:`rolltap.events.cache_marks`)."""

    length: int
    digest: str | None
    marks: tuple[Mark, ...] = ()

    def fields(self) -> dict[str, Any]:
        """What a request event records of the prefix (docs/events.md)."""
        out: dict[str, Any] = {"prefix_digest": self.digest, "prefix_messages": self.length}
        if self.marks:
            out["prefix_cache_control"] = [list(mark) for mark in self.marks]
        return out


@dataclass(slots=True)
class _Known:
    length: int  # messages
    chain: bytes  # the rolling digest after them
    dialect: str  # the dialect it was validated in
    state: _Hash | None  # the rolling digest's state, while among the newest
    marks: tuple[Mark, ...]  # its prompt-caching markers as sent


@dataclass(frozen=True, slots=True)
class Found:
    """What :meth:`ConversationIndex.find` found for ``messages``."""

    messages: list[Any]
    #: the messages as compared: without their prompt-caching markers (``marks``)
    canonical: list[Any]
    marks: list[Mark]
    #: ``canonical`` serialized with sorted keys (None: empty, or not serializable)
    dump: bytes | None
    known: _Known | None
    generation: int
    #: SHA-256 of the dump (of b"" without one): the key of the conversation's entry
    digest: bytes

    @property
    def identity(self) -> bytes:
        """The conversation as sent, markers included, which a retry's digest is made of
        (:func:`rolltap.gateway.replay.digest`)."""
        return _identity(self.digest, self.marks)

    @property
    def match(self) -> PrefixMatch:
        k = self.known
        if k is None:
            return PrefixMatch(0, None)
        marks = tuple(m for m in self.marks if m[0] < k.length)
        return PrefixMatch(k.length, k.chain.hex(), marks)

    def validated(self, dialect: str) -> int:
        """Leading messages already validated in ``dialect``: their checks can be skipped
        (up to the first whose markers changed since)."""
        k = self.known
        if k is None or k.dialect != dialect:
            return 0
        sent = {(i, j): v for i, j, v in self.marks if i < k.length}
        were = {(i, j): v for i, j, v in k.marks}
        changed = (
            i
            for i, j in sent.keys() | were.keys()
            if sent.get((i, j), _NONE) != were.get((i, j), _NONE)
        )
        return min(changed, default=k.length)


@dataclass(slots=True)
class ConversationIndex:
    #: byte size of a known conversation's dump -> the last bytes before its end
    _tails: dict[int, set[bytes]] = field(default_factory=dict)
    _sizes: list[int] = field(default_factory=list)  # sorted keys of _tails
    #: SHA-256 of a known conversation's dump -> what is known of it
    _known: dict[bytes, _Known] = field(default_factory=dict)
    #: the conversations whose digest state is kept, least recently used first
    _recent: dict[int, _Known] = field(default_factory=dict)
    _generation: int = 0

    def find(self, messages: list[Any], *, dialect: str = "", held: bool = False) -> Found:
        """The longest known conversation that ``messages`` (in ``dialect``) extends
        (nothing remembered). ``held``: the result is kept across awaits (until the
        call's request event is written), so its dump is sized to fit
        (:func:`~rolltap.events.jsonbytes.dumps_kept`); one used at once is not copied.

        In a marked dialect the messages are looked up as sent first: a prefix found so
        has no markers (a conversation is known without them), so only the messages past
        it are searched for markers, and looked up again without them only where one sits
        before the last message (it may hide a longer prefix)."""
        dumps = dumps_kept if held else orjson.dumps
        try:
            dump = dumps(messages, option=_SORTED) if messages else None
        except orjson.JSONEncodeError:
            dump = None  # nested too deep: validation answers it
        if dump is None:
            return Found(messages, messages, [], None, None, self._generation, _EMPTY)
        hit = self._longest(dump)
        # a prefix found as sent, of a conversation known without markers, has none
        start = hit[0].length if hit is not None and hit[0].dialect in MARKED_DIALECTS else 0
        marks = marks_of(messages, start) if dialect in MARKED_DIALECTS else []
        if hit is not None and (not marks or (start and marks[0][0] == len(messages) - 1)):
            known, size, head = hit
            canonical = messages
            if marks:  # the new messages' markers taken off their bytes
                canonical = unmarked(messages, marks)
                tail = orjson.dumps(canonical[known.length :], option=_SORTED)
                dump = dump[: size - 1] + b"," + tail[1:]
            head.update(memoryview(dump)[size - 1 :])  # only the bytes past the prefix
            return Found(messages, canonical, marks, dump, known, self._generation, head.digest())
        canonical = messages
        if marks:  # looked up again without them
            canonical = unmarked(messages, marks)
            dump = dumps(canonical, option=_SORTED)
            hit = self._longest(dump)
            if hit is not None:
                known, size, head = hit
                head.update(memoryview(dump)[size - 1 :])
                digest = head.digest()
                return Found(messages, canonical, marks, dump, known, self._generation, digest)
        digest = hashlib.sha256(dump).digest()
        return Found(messages, canonical, marks, dump, None, self._generation, digest)

    def _longest(self, dump: bytes) -> tuple[_Known, int, _Hash] | None:
        """The longest known conversation whose dump ``dump`` extends: it, its dump's
        size, and the SHA-256 state of ``dump`` up to the byte past it."""
        view, sizes = memoryview(dump), self._sizes
        for i in range(bisect.bisect_right(sizes, len(dump)) - 1, -1, -1):
            size = sizes[i]
            if dump[size - 1] not in _ENDS:
                continue
            if dump[max(1, size - 1 - _TAIL) : size - 1] not in self._tails[size]:
                continue
            head: _Hash = hashlib.sha256(view[: size - 1])
            h = head.copy()
            h.update(b"]")
            known = self._known.get(h.digest())
            if known is not None:
                return known, size, head
        return None

    def remember(self, found: Found, dialect: str) -> PrefixMatch:
        """Remember ``found``'s conversation (validated in ``dialect``); its prefix match."""
        if found.generation != self._generation:
            # another call remembered one meanwhile
            found = self.find(found.messages, dialect=dialect)
        messages, dump, known = found.canonical, found.dump, found.known
        if dump is None or (known is not None and known.length == len(messages)):
            return found.match
        start = 0
        state: _Hash = hashlib.sha256()
        if known is not None and known.state is not None:
            state, start = known.state.copy(), known.length
        for i in range(start, len(messages)):
            state.update(link(messages[i]))
            if known is not None and i + 1 == known.length:
                known.state = state.copy()  # rebuilt: the prefix may be branched from again
        if known is not None:
            self._keep(known)
        marks = tuple(found.marks)
        self._add(dump, found.digest, _Known(len(messages), state.digest(), dialect, state, marks))
        return found.match

    def match(
        self, messages: list[Any], *, remember: bool = True, dialect: str = ""
    ) -> PrefixMatch:
        """Find the longest known conversation that ``messages`` extends, then remember it
        (unless ``remember`` is false: a token count is not part of the conversation)."""
        found = self.find(messages, dialect=dialect)
        return self.remember(found, dialect) if remember else found.match

    def _add(self, dump: bytes, digest: bytes, known: _Known) -> None:
        size = len(dump)
        tails = self._tails.get(size)
        if tails is None:
            tails = self._tails[size] = set()
            bisect.insort(self._sizes, size)
        tails.add(dump[max(1, size - 1 - _TAIL) : size - 1])
        self._known[digest] = known
        self._keep(known)
        self._generation += 1

    def _keep(self, known: _Known) -> None:
        """Keep ``known``'s digest state as the most recently used; drop the oldest's."""
        recent = self._recent
        recent.pop(id(known), None)
        recent[id(known)] = known
        if len(recent) > _STATES:
            recent.pop(next(iter(recent))).state = None

    def __len__(self) -> int:
        return len(self._known)


def conversation_digest(messages: list[Any], dialect: str = "") -> bytes:
    """The identity :meth:`ConversationIndex.find` gives ``messages`` in ``dialect``
    (:attr:`Found.identity`), without an index."""
    if not messages:
        return _EMPTY
    marks = marks_of(messages) if dialect in MARKED_DIALECTS else []
    try:
        dump = orjson.dumps(unmarked(messages, marks) if marks else messages, option=_SORTED)
    except orjson.JSONEncodeError:
        return _EMPTY
    return _identity(hashlib.sha256(dump).digest(), marks)


def _identity(digest: bytes, marks: list[Mark]) -> bytes:
    if not marks:
        return digest
    return hashlib.sha256(digest + orjson.dumps(marks, option=_SORTED)).digest()


def conversation_of(dialect: str, body: Mapping[str, Any]) -> list[Any]:
    """The request's conversation as a list (a Responses string input is one user turn)."""
    value = body.get(CONVERSATION_KEYS[dialect])
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []
