"""Per-rollout conversation index: store each message of a growing conversation once.

A harness resends the whole conversation every turn. The index remembers a rolling
digest of every conversation the rollout has sent; a new request is matched against
them, and its event keeps only the messages past the longest earlier conversation it
extends, plus that prefix's digest and length.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ConversationIndex", "PrefixMatch"]

_SEPARATOR = b"\x1e"


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """``length`` leading messages were seen before (digest ``digest``); the rest are new."""

    length: int
    digest: str | None


@dataclass(slots=True)
class ConversationIndex:
    _seen: dict[bytes, int] = field(default_factory=dict)

    def match(self, messages: list[Any], *, remember: bool = True) -> PrefixMatch:
        """Find the longest known conversation that ``messages`` extends, then remember it
        (unless ``remember`` is false: a token count is not part of the conversation)."""
        h = hashlib.sha256()
        best = PrefixMatch(0, None)
        digest = b""
        for i, message in enumerate(messages, start=1):
            h.update(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))
            h.update(_SEPARATOR)
            digest = h.digest()
            if digest in self._seen:
                best = PrefixMatch(i, digest.hex())
        if messages and remember:
            self._seen[digest] = len(messages)
        return best

    def __len__(self) -> int:
        return len(self._seen)
