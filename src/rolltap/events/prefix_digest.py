"""The rolling digest a ``model_request`` names its prefix by (``prefix_digest``).

SHA-256 over each message as JSON with sorted keys, followed by the byte ``0x1e``, resumed
message by message (docs/events.md); in a marked dialect over the messages without their
content blocks' prompt-caching markers (:mod:`rolltap.events.cache_marks`). The gateway's
conversation index makes it (:mod:`rolltap.gateway.conversation`), readers of a log
find a prefix by it (:func:`rolltap.exports.sent_requests`).

>>> chain_digest([], "chat") == hashlib.sha256().hexdigest()
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import orjson

from rolltap.events.cache_marks import MARKED_DIALECTS, marks_of, unmarked

__all__ = ["chain_digest", "digests", "link"]

_SEPARATOR = b"\x1e"


def link(message: Any) -> bytes:
    """What one message adds to the digest (``message`` as compared: markers off)."""
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS) + _SEPARATOR


def digests(messages: list[Any], dialect: str | None) -> Iterator[str]:
    """The digest after each of ``messages`` (as sent, in ``dialect``)."""
    if dialect in MARKED_DIALECTS:
        messages = unmarked(messages, marks_of(messages))
    chain = hashlib.sha256()
    for message in messages:
        chain.update(link(message))
        yield chain.hexdigest()


def chain_digest(messages: list[Any], dialect: str | None) -> str:
    """The ``prefix_digest`` a request naming ``messages`` (in ``dialect``) as its prefix
    carries."""
    last = hashlib.sha256().hexdigest()
    for last in digests(messages, dialect):  # noqa: B007 (the last one is the answer)
        pass
    return last
