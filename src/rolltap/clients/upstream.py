"""The one interface every kind of upstream sits behind, and what passes through it.

Like an httpx transport, an :class:`Upstream` is small: :meth:`~Upstream.rewrite`
makes the harness's call into the upstream's own request (no I/O on the wire: the
gateway records that request before anything is sent), :meth:`~Upstream.call` sends
it and yields the :class:`Reply` — status and headers at once, the body read on
demand, inside the block so a connection is never leaked. The gateway's
:class:`~rolltap.gateway.call.ModelCall` does the rest the same way for every kind:
deliver the reply to the harness, record it.

Each rollout gets its own upstream when it registers (:func:`rolltap.clients.upstream_for`),
on the model client the pool lent it; a kind that keeps per-rollout state (the token
upstream's last prompt) keeps it there. Upstreams never retry: a failure raises a
:class:`~rolltap.errors.UpstreamError` that reaches the harness and the trace.

A new kind of upstream is one class with these two methods and a ``name``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from rolltap.clients.capture import ServerCapture
from rolltap.dialects.canonical import Dialect, Response
from rolltap.errors import UpstreamStatusError
from rolltap.http.json_body import EncodedMembers

__all__ = [
    "Answer",
    "Body",
    "CallGate",
    "Cut",
    "ModelRequest",
    "Reply",
    "ReplyKind",
    "Upstream",
    "UpstreamRequest",
    "status_error",
]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call as the harness made it, handed to an upstream."""

    #: the harness's dialect
    dialect: Dialect
    #: the harness's body, validated; a pass-through upstream rewrites it in place, so
    #: what the request event records of it is what was sent
    body: dict[str, Any]
    #: the harness's headers (the model client drops hop-by-hop ones and credentials)
    headers: Mapping[str, str]
    rollout_id: str
    #: the intercept's id: unique per call (ids of tool calls an upstream parses out)
    call_id: str
    #: the run's settings forced on every call (temperature, max_tokens, …)
    sampling: Mapping[str, Any]
    #: whether the harness asked for an event stream
    stream: bool
    #: the body's bytes as the harness sent them, when the gateway has them: a relay
    #: that changes nothing sends them as they are (no second copy, not re-encoded)
    raw: bytes | None = None
    #: the body's members as the gateway checked them: a relay whose rewrites change a
    #: few top-level values encodes the body from the rest's bytes
    encoded: EncodedMembers | None = None

    def without_raw(self) -> ModelRequest:
        """This call less its bytes and members (once the upstream has made its request
        of them).
        Built field by field: ``dataclasses.replace`` costs several times more, per call."""
        return ModelRequest(
            self.dialect, self.body, self.headers, self.rollout_id, self.call_id,
            self.sampling, self.stream,
        )  # fmt: skip


@dataclass(slots=True)
class UpstreamRequest:
    """What :meth:`Upstream.rewrite` made of a call: ready to send, and to record."""

    call: ModelRequest
    #: the upstream-side body, sent as JSON
    body: dict[str, Any]
    #: ``{"field", "from", "to"}`` for each change the run's settings made
    rewrites: list[dict[str, Any]]
    #: fields the upstream adds to the request event (a token call's ``tokens``)
    record: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Answer:
    """A whole answer, read."""

    #: the upstream's own body, recorded as it came
    body: dict[str, Any]
    #: its bytes: what a harness of the upstream's dialect gets
    raw: bytes
    #: the answer in the canonical model when the upstream parsed it itself (None: the
    #: body is in the reply's dialect, parsed by whoever needs it)
    canonical: Response | None = None
    #: fields the upstream adds to the response event (a token call's ``tokens``)
    record: dict[str, Any] = field(default_factory=dict)
    #: the gateway's policy version its last part was sent under, when the upstream gates
    #: the parts of an answer itself (a token completion continued across a pause); the
    #: engine's reported version is checked against it
    sent_version: str | None = None
    #: seconds those parts waited at the gate, inside the upstream's window (the call's
    #: ``timing`` counts them as waited, not as the upstream's)
    waited_s: float = 0.0


class Body(Protocol):
    """An upstream body as it arrives (:class:`~rolltap.clients.relay.UpstreamResponse`)."""

    async def read(self) -> bytes:
        """The whole body."""
        ...

    async def read_chunk(self, silence_s: float | None = None) -> bytes | None:
        """The next bytes, ``b""`` at the end, ``None`` after ``silence_s`` of silence."""
        ...


#: ``stream``: server-sent events in the reply's dialect, relayed as they arrive;
#: ``body``: one JSON body in the reply's dialect, relayed whole;
#: ``answer``: a body only the upstream reads (:attr:`Reply.parse`), answered as the
#: harness asked — as a stream when it asked for one
ReplyKind = Literal["stream", "body", "answer"]


@dataclass(slots=True)
class Reply:
    """The upstream's answer as it arrives: status and headers at once."""

    status: int
    #: the headers the harness gets (:func:`~rolltap.clients.relay.relayed_headers`)
    headers: dict[str, str]
    kind: ReplyKind
    #: a stream's or a body's dialect, and the dialect of every error body
    dialect: Dialect
    body: Body
    #: the whole body → the answer (a status under 400); async, as a token upstream may
    #: decode the sampled ids with its tokenizer
    parse: Callable[[bytes], Awaitable[Answer]]
    #: ``Retry-After`` as the upstream sent it
    retry_after: str | None = None
    #: a chat relay's server-side token capture: what a stream's chunks lose on the way to
    #: the harness and the record gains (a whole body's is :attr:`parse`'s to do)
    capture: ServerCapture | None = None


R = TypeVar("R", bound=UpstreamRequest)


class Upstream(Protocol[R]):
    """Where a rollout's model calls go: rewrite, then call."""

    #: what events name as the upstream dialect (``chat``, ``completions.vllm``, …)
    name: str

    async def rewrite(self, call: ModelRequest) -> R:
        """The upstream's request for ``call``: the run's settings applied, nothing sent.

        Raises :class:`~rolltap.errors.InvalidRequestError` for a call the upstream cannot
        express (recorded as the call's error; no request event).
        """
        ...

    def call(self, request: R) -> AbstractAsyncContextManager[Reply]:
        """Send ``request``; the reply lives inside the block. Never retries."""
        ...


class CallGate(Protocol):
    """An endpoint's policy gate as an upstream sees it (the gateway's
    :class:`~rolltap.gateway.policy.PolicyGate`): the trainer's current policy version,
    and its pauses. A token upstream cuts and continues completions through it."""

    @property
    def version(self) -> str | None:
        """The policy version the trainer set last (None: none set)."""
        ...

    def waiting(self) -> AbstractAsyncContextManager[None]:
        """Wait while the endpoint is paused, not counted as in flight (a ``drain`` pause
        does not wait for it); raises :class:`~rolltap.errors.PausedError` after
        ``pause_max_s``."""
        ...

    def cuttable(self) -> AbstractAsyncContextManager[Cut]:
        """A scope an ``abort`` pause cuts: :attr:`Cut.aborted` is set and the block ends
        with :class:`~rolltap.errors.UpstreamAbortedError`."""
        ...


class Cut(Protocol):
    """One upstream request an ``abort`` pause can cut."""

    @property
    def aborted(self) -> bool: ...


def status_error(reply: Reply, raw: bytes) -> UpstreamStatusError:
    """The error for an answer with status 400 or more, its body ``raw``: the upstream's
    own error object (in the reply's dialect) kept for the harness's error body."""
    detail = reply.dialect.upstream_error_detail(raw)
    message = f"upstream answered HTTP {reply.status}"
    if detail is not None and isinstance(detail.get("message"), str):
        message += ": " + detail["message"]
    err = UpstreamStatusError(
        message, upstream_status=reply.status, body=raw,
        retry_after=_seconds(reply.retry_after),
    )  # fmt: skip
    err.upstream_error = detail
    return err


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
