"""Harness retries: recognized, linked to the call they repeat, answered once.

The official OpenAI and Anthropic SDKs retry a call after a connection error, a 408,
429 or 5xx, sending ``x-stainless-retry-count`` (1, 2, …). rolltap never retries on its
own, and a harness that disconnects still cancels its upstream call (DESIGN 3 and 4);
what this module adds is that a retry is *recorded* as one, and that a retry of a call
whose answer had arrived but could not be delivered (the harness timed out or went away
while the gateway was writing it) is answered from that answer instead of sampling
again: the upstream is called once, the training data holds one sample.

A request's digest is made of its fields but the conversation and of the conversation's
SHA-256, which the rollout's conversation index makes of every call anyway
(:attr:`~rolltap.gateway.conversation.Found.digest`): digesting costs a call no pass over
its history. Nothing more is digested for an ordinary call: a rollout's
:class:`ReplayBook` exists only once one of its calls failed, went undelivered or carried
an ``Idempotency-Key``, and a request is digested only then. An upstream rewrites a
passed-through body in place (``model``, the run's sampling, ``include_usage``), and the
gateway lets go of a body's conversation once it is recorded and sent; so a call keeps a
copy of the body's other top-level fields as the harness sent them (:attr:`Lookup.sent`,
one small dict) and the conversation's digest: the digest a failed call is remembered
under is made of those, as its retry's is of the body it sends again.

>>> book = ReplayBook()
>>> book.remember(digest("chat", {"messages": []}), Kept("c1", None))
>>> book.find(digest("chat", {"messages": []})).call_id
'c1'
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rolltap.dialects.canonical import Response
from rolltap.errors import IdempotencyKeyReusedError, InvalidRequestError
from rolltap.gateway.conversation import CONVERSATION_KEYS, conversation_digest, conversation_of

__all__ = [
    "IDEMPOTENCY_HEADER",
    "RETRY_HEADER",
    "Answer",
    "Kept",
    "Lookup",
    "ReplayBook",
    "digest",
    "digested",
    "look_up",
]

RETRY_HEADER = "x-stainless-retry-count"
IDEMPOTENCY_HEADER = "idempotency-key"
_MAX_KEY_CHARS = 255


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete answer the upstream gave, to render again in the harness's dialect (a
    body or a stream, whichever the retry asks for)."""

    status: int
    response: Response
    #: the original's ``model_response`` payload past its envelope (body or message,
    #: usage, finish_reason), copied onto the replay's event without its token record
    recorded: dict[str, Any]
    #: about how much memory it holds (its recorded body's JSON size)
    nbytes: int


@dataclass(frozen=True, slots=True)
class Kept:
    """A call a retry may repeat: its intercept id and, if it was answered, the answer."""

    call_id: str
    answer: Answer | None
    #: the request's digest (an ``Idempotency-Key`` entry checks the body against it)
    request: str = ""


@dataclass(frozen=True, slots=True)
class Lookup:
    """What an arriving call is: a retry (``retry_count`` > 0, ``retry_of`` when the call it
    repeats is known) and, when that call's answer was kept, the answer to replay."""

    retry_count: int = 0
    retry_of: str | None = None
    replay: Answer | None = None
    #: where the answer is remembered once this call ends (its digest or idempotency key)
    key: str | None = None
    #: the request's digest, when the lookup needed it ("" otherwise)
    request: str = ""
    #: the body's top-level fields but the conversation, as the harness sent them, and the
    #: conversation's SHA-256, kept when the digest was not made: digested only if the
    #: call must be remembered (an upstream's rewrites, made in place on the body,
    #: replace top-level fields and never reach into this copy). The SHA-256 is None
    #: until the conversation index has made it (with the call's request event, for a
    #: relayed call: :meth:`with_conversation`)
    sent: Mapping[str, Any] | None = None
    conversation: bytes | None = None

    def digest_of(self, dialect: str, body: Mapping[str, Any]) -> str:
        """The request's digest as the harness sent it (``body``, in ``dialect``, itself
        when nothing was kept of it: a call made without :func:`look_up`)."""
        if self.request:
            return self.request
        if self.sent is None:
            return digest(dialect, body)
        return _digest(self.sent, self._conversation(dialect, body))

    def _conversation(self, dialect: str, body: Mapping[str, Any]) -> bytes:
        """The conversation's SHA-256: kept, or made of ``body`` (which still holds it
        until the request event is written, where the kept one is set)."""
        if self.conversation is not None:
            return self.conversation
        return conversation_digest(conversation_of(dialect, body), dialect)

    def with_conversation(self, conversation: bytes) -> Lookup:
        """This lookup, with its conversation's SHA-256 kept if it had none."""
        if self.sent is None or self.conversation is not None:
            return self
        # field by field: dataclasses.replace costs several times more, per call
        return Lookup(
            self.retry_count, self.retry_of, self.replay, self.key, self.request, self.sent,
            conversation,
        )  # fmt: skip


NOT_A_RETRY = Lookup()


def digest(dialect: str, body: Mapping[str, Any], conversation: bytes | None = None) -> str:
    """A stable digest of a parsed request ``body`` in ``dialect`` (key order does not
    matter); ``conversation``: its conversation's SHA-256 when already made
    (:attr:`~rolltap.gateway.conversation.Found.digest`)."""
    if conversation is None:
        conversation = conversation_digest(conversation_of(dialect, body), dialect)
    return _digest(_fields(dialect, body), conversation)


def _fields(dialect: str, body: Mapping[str, Any]) -> dict[str, Any]:
    key = CONVERSATION_KEYS[dialect]
    return {k: v for k, v in body.items() if k != key}


def _digest(fields: Mapping[str, Any], conversation: bytes) -> str:
    data = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS) + conversation
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ReplayBook:
    """The few calls of one rollout that a retry may repeat, oldest dropped first.

    Bounded by count and by the bytes of the answers held, so a rollout that retries
    all day holds at most ``max_bytes``.
    """

    def __init__(self, *, max_entries: int = 8, max_bytes: int = 16 << 20) -> None:
        self._entries: OrderedDict[str, Kept] = OrderedDict()
        self._max_entries, self._max_bytes = max_entries, max_bytes
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, key: str) -> Kept | None:
        return self._entries.get(key)

    def remember(self, key: str, kept: Kept) -> None:
        """Keep ``kept`` under ``key`` (replacing what was there); an answer larger than the
        whole bound is kept without its answer (a retry is still linked to it)."""
        if kept.answer is not None and kept.answer.nbytes > self._max_bytes:
            kept = Kept(kept.call_id, None, kept.request)
        self.forget(key)
        self._entries[key] = kept
        self.nbytes += _size(kept)
        while len(self._entries) > self._max_entries or self.nbytes > self._max_bytes:
            _, old = self._entries.popitem(last=False)
            self.nbytes -= _size(old)

    def forget(self, key: str) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= _size(old)


def _size(kept: Kept) -> int:
    return 0 if kept.answer is None else kept.answer.nbytes


def retry_count_of(headers: Mapping[str, str]) -> int:
    """The SDK's retry count (0 for a first attempt, or when absent or unreadable)."""
    value = headers.get(RETRY_HEADER)
    if value is None:
        return 0
    try:
        return max(0, int(value))
    except ValueError:
        return 0


def idempotency_key_of(headers: Mapping[str, str]) -> str | None:
    value = headers.get(IDEMPOTENCY_HEADER)
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _MAX_KEY_CHARS:
        raise InvalidRequestError(
            f"must be 1 to {_MAX_KEY_CHARS} characters", field="Idempotency-Key"
        )
    return value


def digested(book: ReplayBook | None, headers: Mapping[str, str]) -> bool:
    """Whether :func:`look_up` digests an arriving call with ``headers`` (its
    conversation's SHA-256 is needed then, before the call is made)."""
    return book is not None or IDEMPOTENCY_HEADER in headers


def look_up(
    book: ReplayBook | None, headers: Mapping[str, str], dialect: str, body: Mapping[str, Any],
    conversation: bytes | None,
) -> Lookup:  # fmt: skip
    """What the arriving call with ``headers`` and ``body`` (in ``dialect``, its
    conversation's SHA-256 ``conversation``: None when not made yet, which it must be
    when the call is :func:`digested`) is, against the rollout's book.

    ``IdempotencyKeyReusedError`` when its ``Idempotency-Key`` was used with another body.
    """
    retries = retry_count_of(headers)
    key = idempotency_key_of(headers)
    if not digested(book, headers):  # a copy of the fields, in case it fails
        return Lookup(retries, sent=_fields(dialect, body), conversation=conversation)
    request = digest(dialect, body, conversation)
    keyed = None if key is None else "key:" + key
    kept = None if book is None else book.find(keyed or request)
    if kept is None:
        return Lookup(retries, key=keyed, request=request)
    if keyed is not None and kept.request != request:
        raise IdempotencyKeyReusedError(
            f"Idempotency-Key {key!r} was used by call {kept.call_id} with another body"
        )
    return Lookup(retries, kept.call_id, kept.answer, keyed, request)


#: statuses after which the SDKs retry (as do most clients): a retry of such a call is linked
_RETRIED = frozenset({408, 409, 429})
#: the original's response fields a replay's event does not copy (its own, or the sample's)
_ENVELOPE = frozenset({"intercept_id", "status", "stream", "dialect", "timing", "tokens"})


def retried_status(status: int) -> bool:
    return status in _RETRIED or status >= 500


def replayed_fields(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """What a replay's ``model_response`` copies from the original's (no token record)."""
    return {k: v for k, v in recorded.items() if k not in _ENVELOPE}


@dataclass(slots=True)
class Delivery:
    """How a call's answer was delivered, as far as a retry of it is concerned: whether it
    arrived, whether it reached the harness, the error status the harness got instead."""

    call_id: str
    delivered: bool = False
    #: the upstream's complete answer arrived (whether or not it was then delivered)
    answered: bool = False
    error_status: int | None = None


def settle(
    book: ReplayBook | None, lookup: Lookup, delivery: Delivery, digest_of: Callable[[], str],
    answer: Callable[[], Answer], *, max_bytes: int,
) -> ReplayBook | None:  # fmt: skip
    """Remember what a retry of this call will need; the rollout's book (made on first need).

    Kept: an answer that arrived but was not delivered, and every answer to a call with an
    ``Idempotency-Key``; linked only: a call that failed or never reached its harness. A
    replay delivered lets its entry go (one retry, one replay), unless the call is keyed.
    """
    keyed = lookup.key is not None
    if lookup.replay is not None:
        if delivery.delivered and not keyed and book is not None:
            book.forget(lookup.request)
        return book
    if delivery.answered and (keyed or not delivery.delivered):
        kept = Kept(delivery.call_id, answer(), digest_of())
    elif not delivery.delivered or (
        delivery.error_status is not None and retried_status(delivery.error_status)
    ):
        kept = Kept(delivery.call_id, None, digest_of())
    else:
        return book
    book = book if book is not None else ReplayBook(max_bytes=max_bytes)
    book.remember(lookup.key or kept.request, kept)
    return book
