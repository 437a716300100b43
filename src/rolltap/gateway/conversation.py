"""Per-rollout conversation index: store each message of a growing conversation once.

A harness resends the whole conversation every turn. The index remembers a rolling
digest of every conversation the rollout has sent; a new request is matched against
them, and its event keeps only the messages past the longest earlier conversation it
extends, plus that prefix's digest and length. :func:`conversation_of` finds the
conversation in a request body of any dialect.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["CONVERSATION_KEYS", "ConversationIndex", "PrefixMatch", "conversation_of"]

#: where each dialect keeps the conversation in a request body
CONVERSATION_KEYS: Mapping[str, str] = {
    "chat": "messages",
    "messages": "messages",
    "responses": "input",
}

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


def conversation_of(dialect: str, body: Mapping[str, Any]) -> list[Any]:
    """The request's conversation as a list (a Responses string input is one user turn)."""
    value = body.get(CONVERSATION_KEYS[dialect])
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []
