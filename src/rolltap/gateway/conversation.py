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
prefix that was validated in its dialect (:meth:`Found.validated`).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from rolltap.events.jsonbytes import dumps_kept

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

_SEPARATOR = b"\x1e"
_SORTED = orjson.OPT_SORT_KEYS
_TAIL = 16  # bytes before a prefix's end compared before it is hashed
_ENDS = frozenset(b",]")
#: rolling-digest states kept (the conversations last remembered or extended): a branch
#: from another rebuilds its state from the start
_STATES = 8
_EMPTY = hashlib.sha256(b"").digest()


class _Hash(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...
    def digest(self) -> bytes: ...
    def copy(self) -> _Hash: ...


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """``length`` leading messages were seen before (digest ``digest``); the rest are new."""

    length: int
    digest: str | None


@dataclass(slots=True)
class _Known:
    length: int  # messages
    chain: bytes  # the rolling digest after them
    dialect: str  # the dialect it was validated in
    state: _Hash | None  # the rolling digest's state, while among the newest


@dataclass(frozen=True, slots=True)
class Found:
    """What :meth:`ConversationIndex.find` found for ``messages``."""

    messages: list[Any]
    #: the conversation serialized with sorted keys (None: empty, or not serializable)
    dump: bytes | None
    known: _Known | None
    generation: int
    #: SHA-256 of the dump (of b"" without one): the conversation's identity, which a
    #: retry's digest is made of too (:func:`rolltap.gateway.replay.digest`)
    digest: bytes

    @property
    def match(self) -> PrefixMatch:
        k = self.known
        return PrefixMatch(0, None) if k is None else PrefixMatch(k.length, k.chain.hex())

    def validated(self, dialect: str) -> int:
        """Leading messages already validated in ``dialect``: their checks can be skipped."""
        k = self.known
        return k.length if k is not None and k.dialect == dialect else 0


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

    def find(self, messages: list[Any], *, held: bool = False) -> Found:
        """The longest known conversation that ``messages`` extends (nothing remembered).
        ``held``: the result is kept across awaits (until the call's request event is
        written), so its dump is sized to fit (:func:`~rolltap.events.jsonbytes.
        dumps_kept`); one used at once is not copied."""
        dumps = dumps_kept if held else orjson.dumps
        try:
            dump = dumps(messages, option=_SORTED) if messages else None
        except orjson.JSONEncodeError:
            dump = None  # nested too deep: validation answers it
        if dump is None:
            return Found(messages, None, None, self._generation, _EMPTY)
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
                head.update(view[size - 1 :])  # only the bytes past the prefix
                return Found(messages, dump, known, self._generation, head.digest())
        return Found(messages, dump, None, self._generation, hashlib.sha256(dump).digest())

    def remember(self, found: Found, dialect: str) -> PrefixMatch:
        """Remember ``found``'s conversation (validated in ``dialect``); its prefix match."""
        if found.generation != self._generation:
            found = self.find(found.messages)  # another call remembered one meanwhile
        messages, dump, known = found.messages, found.dump, found.known
        if dump is None or (known is not None and known.length == len(messages)):
            return found.match
        start = 0
        state: _Hash = hashlib.sha256()
        if known is not None and known.state is not None:
            state, start = known.state.copy(), known.length
        for i in range(start, len(messages)):
            state.update(orjson.dumps(messages[i], option=_SORTED))
            state.update(_SEPARATOR)
            if known is not None and i + 1 == known.length:
                known.state = state.copy()  # rebuilt: the prefix may be branched from again
        if known is not None:
            self._keep(known)
        self._add(dump, found.digest, _Known(len(messages), state.digest(), dialect, state))
        return found.match

    def match(
        self, messages: list[Any], *, remember: bool = True, dialect: str = ""
    ) -> PrefixMatch:
        """Find the longest known conversation that ``messages`` extends, then remember it
        (unless ``remember`` is false: a token count is not part of the conversation)."""
        found = self.find(messages)
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


def conversation_digest(messages: list[Any]) -> bytes:
    """The SHA-256 :meth:`ConversationIndex.find` makes of ``messages``
    (:attr:`Found.digest`), without an index."""
    if not messages:
        return _EMPTY
    try:
        return hashlib.sha256(orjson.dumps(messages, option=_SORTED)).digest()
    except orjson.JSONEncodeError:
        return _EMPTY


def conversation_of(dialect: str, body: Mapping[str, Any]) -> list[Any]:
    """The request's conversation as a list (a Responses string input is one user turn)."""
    value = body.get(CONVERSATION_KEYS[dialect])
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []
