"""What the conversation index (:mod:`.conversation`) finds: a call's prefix match, the
conversations it knows, and a lookup's result on its way to being remembered."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from rolltap.events.cache_marks import Mark
from rolltap.gateway.conversation_dumps import DumpKey, Hash

__all__ = ["EMPTY", "After", "Found", "Known", "PrefixMatch", "SentPrefix", "identity"]

#: the key of no conversation
EMPTY = hashlib.sha256(b"").digest()
_NONE = object()  # no marker there


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


@dataclass(frozen=True, slots=True)
class SentPrefix:
    """A conversation sent before, found at the start of a body's conversation bytes
    (:meth:`ConversationIndex.sent_prefix`), with the hash states to go on from."""

    known: Known
    #: its bytes' size (the closing bracket's place counted), and the sent index's
    #: state over all of them but that byte
    size: int
    head: Hash
    #: the rolling digest's state after its messages, and its sorted dump's open state
    #: (None: let go)
    chain: Hash | None
    open: Hash | None


@dataclass(frozen=True, slots=True)
class After:
    """Messages past a known conversation, ready to be found (:meth:`ConversationIndex.
    found_after`): ``messages`` (the conversation's past its first ``skipped``), as
    compared (without their markers), the markers (numbered in the whole conversation),
    the sorted dump of those past the prefix (None: none) and the bytes they were sent
    as."""

    prefix: SentPrefix
    messages: list[Any]
    skipped: int
    canonical: list[Any]
    marks: list[Mark]
    more: bytes | None
    sent: bytes | memoryview


@dataclass(slots=True)
class Known:
    length: int  # messages
    chain: bytes  # the rolling digest after them
    dialect: str  # the dialect it was validated in
    marks: tuple[Mark, ...]  # its prompt-caching markers as sent
    key: DumpKey  # its sorted dump's
    #: while among the newest: the rolling digest's state, and the sorted dump's open
    #: state (:meth:`DumpKey.extended`)
    state: Hash | None
    open: Hash | None


@dataclass(frozen=True, slots=True)
class Found:
    """What :meth:`ConversationIndex.find` found for ``messages`` (those past ``skipped``:
    a body read past a known prefix, :meth:`ConversationIndex.found_after`)."""

    messages: list[Any]
    #: the messages as compared: without their prompt-caching markers (``marks``)
    canonical: list[Any]
    #: the markers, numbered in the whole conversation
    marks: list[Mark]
    known: Known | None
    generation: int
    #: ``canonical``'s sorted dump's key and open state (None: empty, or not writable)
    key: DumpKey | None = None
    open: Hash | None = None
    #: the key of the bytes the messages will be sent as again (:meth:`_resent_key`),
    #: where their bytes were given
    sent: DumpKey | None = None
    #: leading messages not in ``messages`` (never parsed), and the rolling digest's
    #: state after them
    skipped: int = 0
    chain: Hash | None = None

    def past(self, length: int) -> list[Any]:
        """The messages past the first ``length`` (at least ``skipped``)."""
        return self.messages[length - self.skipped :]

    @property
    def digest(self) -> bytes:
        """SHA-256 of the sorted dump (of b"" without one): the conversation's key."""
        return EMPTY if self.key is None else self.key.digest

    @property
    def identity(self) -> bytes:
        """The conversation as sent, markers included, which a retry's digest is made of
        (:func:`rolltap.gateway.replay.digest`)."""
        return identity(self.digest, self.marks)

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


def identity(digest: bytes, marks: list[Mark]) -> bytes:
    if not marks:
        return digest
    return hashlib.sha256(digest + orjson.dumps(marks, option=orjson.OPT_SORT_KEYS)).digest()
