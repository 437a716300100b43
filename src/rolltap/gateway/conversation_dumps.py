"""Known conversations by the bytes of one way of writing them (:mod:`.conversation`).

A conversation written as a JSON array of ``L`` bytes is a prefix of a longer one's
exactly when their first ``L - 1`` bytes agree and the longer one's next byte ends an
array element (``,`` or ``]``). :meth:`DumpIndex.longest` tries the known sizes longest
first, filtered by that byte and the bytes before it, and hashes only a candidate that
passes. A known dump is kept as its :class:`DumpKey` (size, last bytes, SHA-256), never
as its bytes: a rollout's index costs a few dozen bytes per conversation. Each index
hashes with its own function: SHA-256 where a key is a conversation's identity, a faster
one where the key only finds a candidate (:data:`FAST`).
"""

from __future__ import annotations

import bisect
import hashlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, Protocol, TypeVar

import xxhash

__all__ = ["FAST", "TAIL", "DumpIndex", "DumpKey", "Hash"]

#: bytes before a dump's closing bracket compared before it is hashed
TAIL = 16
_ENDS = frozenset(b",]")

T = TypeVar("T")


class Hash(Protocol):
    """A hash's running state (``hashlib``'s, ``xxhash``'s)."""

    def update(self, data: bytes | memoryview, /) -> None: ...
    def digest(self) -> bytes: ...
    def copy(self) -> Hash: ...


#: XXH3-128 under a seed drawn per process (~40 × SHA-256's speed; at 400 messages
#: 120 KB hash in ~2 µs instead of ~60): an honest harness never meets a collision,
#: and a harness that forged one would only misname its own rollout's prefix
FAST: Callable[[], Hash] = partial(xxhash.xxh3_128, seed=secrets.randbits(64))


def _closed(state: Hash) -> bytes:
    done = state.copy()
    done.update(b"]")
    return done.digest()


@dataclass(frozen=True, slots=True)
class DumpKey:
    """What a dump (a non-empty JSON array) is known by: its size in bytes, the up to
    :data:`TAIL` bytes before its closing bracket, and its hash (SHA-256 unless its
    index hashes with another function)."""

    size: int
    tail: bytes
    digest: bytes

    @classmethod
    def of(
        cls, dump: bytes | memoryview, head: Hash | None = None, start: int = 0,
        new: Callable[[], Hash] = hashlib.sha256,
    ) -> tuple[DumpKey, Hash]:  # fmt: skip
        """``dump``'s key, and the hash state (``new``'s) of all of it but its closing
        bracket (what :meth:`extended` resumes from). ``head``: a state already over
        ``dump[:start]``, taken over."""
        view = memoryview(dump)
        size = len(view)
        state = new() if head is None else head
        state.update(view[start : size - 1])
        tail = view[max(1, size - 1 - TAIL) : size - 1].tobytes()
        return cls(size, tail, _closed(state)), state

    def extended(self, state: Hash, more: bytes) -> tuple[DumpKey, Hash]:
        """The key of this dump with the elements of ``more`` (a non-empty array's dump)
        appended, and its open state (as :meth:`of`); ``state``, this dump's open state,
        is left as it was."""
        state = state.copy()
        state.update(b",")
        state.update(memoryview(more)[1:-1])
        tail = (self.tail + b"," + more[max(1, len(more) - 1 - TAIL) : -1])[-TAIL:]
        return DumpKey(self.size + len(more) - 1, tail, _closed(state)), state


@dataclass(slots=True)
class DumpIndex(Generic[T]):
    """Known dumps by their keys (made with :meth:`key`), each naming what it is known
    as (a ``T``); ``new`` starts a hash."""

    new: Callable[[], Hash] = hashlib.sha256
    #: a known dump's size -> the last bytes before its end (:attr:`DumpKey.tail`)
    _tails: dict[int, set[bytes]] = field(default_factory=dict)
    _sizes: list[int] = field(default_factory=list)  # sorted keys of _tails
    _known: dict[bytes, T] = field(default_factory=dict)  # by the dump's hash

    def longest(self, dump: bytes | memoryview) -> tuple[T, int, Hash] | None:
        """The longest known dump that ``dump`` extends (or is): what it is known as,
        its size, and the hash state of ``dump`` up to the byte past it."""
        view = memoryview(dump)
        for size in self._fitting(view, 0, 0, len(view)):
            head = self.new()
            head.update(view[: size - 1])
            known = self._known.get(_closed(head))
            if known is not None:
                return known, size, head
        return None

    def longest_past(self, key: DumpKey, state: Hash, more: bytes) -> T | None:
        """The longest known dump longer than ``key``'s that the dump of ``key``'s array
        with ``more``'s elements appended extends (or is), without that dump's bytes:
        those past ``key``'s last :data:`TAIL` are ``more``'s, and the hash of the
        rest resumes from ``state`` (``key``'s open state, left as it was)."""
        suffix = memoryview(key.tail + b"," + more[1:])
        offset = key.size - 1 - len(key.tail)  # suffix[i] is the whole dump's [offset + i]
        for size in self._fitting(suffix, offset, key.size, key.size + len(more) - 1):
            head = state.copy()
            head.update(suffix[len(key.tail) : size - 1 - offset])
            known = self._known.get(_closed(head))
            if known is not None:
                return known
        return None

    def _fitting(self, view: memoryview, offset: int, above: int, upto: int) -> Iterator[int]:
        """The known sizes in (``above``, ``upto``], longest first, at which the dump
        ``view`` shows (its byte ``offset + i`` at ``view[i]``) could end a known one:
        the byte there ends an array element and the bytes before it are a known tail."""
        sizes = self._sizes
        for i in range(bisect.bisect_right(sizes, upto) - 1, -1, -1):
            size = sizes[i]
            if size <= above:
                return
            end = size - 1 - offset
            if view[end] not in _ENDS:
                continue
            if view[max(1, size - 1 - TAIL) - offset : end].tobytes() in self._tails[size]:
                yield size

    def key(
        self, dump: bytes | memoryview, head: Hash | None = None, start: int = 0
    ) -> tuple[DumpKey, Hash]:
        """:meth:`DumpKey.of`, hashed as this index hashes."""
        return DumpKey.of(dump, head, start, self.new)

    def add(self, key: DumpKey, known: T) -> None:
        tails = self._tails.get(key.size)
        if tails is None:
            tails = self._tails[key.size] = set()
            bisect.insort(self._sizes, key.size)
        tails.add(key.tail)
        self._known[key.digest] = known

    def __len__(self) -> int:
        return len(self._known)
