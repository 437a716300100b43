"""A rollout registered on the gateway, and the intercepts of its in-flight calls."""

from __future__ import annotations

import asyncio
import secrets
import time
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from rolltap.clients.relay import RelayClient
from rolltap.clients.upstream import Upstream
from rolltap.config import EndpointConfig
from rolltap.errors import (
    InvalidRequestError,
    LimitReachedError,
    PolicyStaleError,
    RolloutClosedError,
    RolltapError,
)
from rolltap.events import ID_LENGTH, EventLog
from rolltap.gateway.conversation import ConversationIndex
from rolltap.gateway.kept_params import KeptParams
from rolltap.gateway.limits import InflightLimiter, RolloutLimits
from rolltap.gateway.pinning import ReplicaPin
from rolltap.gateway.policy import PolicyGate
from rolltap.gateway.replay import ReplayBook
from rolltap.http.auth import tokens_match
from rolltap.pool import Lease

__all__ = [
    "SESSION_KEY", "Host", "Intercept", "Rollout", "new_rollout_id", "new_secret",
    "session_id_of",
]  # fmt: skip


#: the rollout metadata key naming its store session (default: the rollout id)
SESSION_KEY = "session_id"


def session_id_of(metadata: dict[str, Any], rollout_id: str) -> str:
    """The session a rollout registered with ``metadata`` records to: its
    ``metadata["session_id"]`` when given, else the rollout id."""
    given = metadata.get(SESSION_KEY)
    if given is None:
        return rollout_id
    if not isinstance(given, str) or not 0 < len(given) <= ID_LENGTH:
        raise InvalidRequestError(
            f"must be a string of 1 to {ID_LENGTH} characters", field=f"metadata.{SESSION_KEY}"
        )
    return given


def new_rollout_id() -> str:
    return "ro_" + secrets.token_hex(8)


def new_secret() -> str:
    return "rt-" + secrets.token_urlsafe(24)


@dataclass(eq=False, slots=True)
class Intercept:
    """One in-flight model call: held until delivered, then discarded.

    The gateway cancels an intercept's handler task to unblock it (unregister, abort);
    ``abort_error`` tells the handler the cancellation was the gateway's, so it answers
    the harness with that error instead of dropping the connection.
    """

    id: str
    task: asyncio.Task[Any] | None
    started: float = field(default_factory=time.perf_counter)
    abort_error: RolltapError | None = None
    discarded: bool = False

    def cancel(self, error: RolltapError) -> None:
        if self.abort_error is None:
            self.abort_error = error
            if self.task is not None:
                self.task.cancel()

    def claim_cancellation(self) -> RolltapError | None:
        """Called on CancelledError: our abort error if the gateway cancelled, else None."""
        if self.abort_error is None or self.task is None:
            return None
        # Consume exactly the cancellation we requested, as asyncio.timeout() does.
        if self.task.uncancel() > 0:
            return None
        return self.abort_error


class Host(Protocol):
    """Where a rollout is placed (a :class:`~rolltap.gateway.server.GatewayServer`)."""

    url: str

    def remove(self, rollout_id: str) -> None: ...


#: a call's upstream slot when its endpoint caps none (reusable, it holds nothing)
_UNCAPPED = nullcontext()


@dataclass(eq=False, slots=True)
class Rollout:
    """A registered rollout. The gateway owns it; the harness knows its id and secret."""

    id: str
    secret: str
    endpoint: EndpointConfig
    lease: Lease[RelayClient]
    #: where its model calls go, chosen when it registered (on the leased client)
    upstream: Upstream[Any]
    server: Host
    #: the store session its events go to, set once at registration (see :func:`session_id_of`)
    session_id: str
    user: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    limits: RolloutLimits = field(default_factory=RolloutLimits)
    #: request fields forced on every call (temperature, max_tokens, …), recorded as rewrites
    sampling: dict[str, Any] = field(default_factory=dict)
    limiter: InflightLimiter | None = None
    #: its replica, on an endpoint with ``replicas`` (None: one ``base_url``)
    pin: ReplicaPin | None = None
    #: which limit ended the rollout ("max_turns", "max_tokens", "timeout"), if any
    limit_reached: str | None = None
    #: its endpoint's policy version and pauses (None: a gateway-less test rollout)
    gate: PolicyGate | None = None
    #: the policy epoch its first call was made in (staleness counts from it)
    first_epoch: int | None = None
    #: refused a call as ``policy_stale``: it ends ``stale``
    stale: bool = False
    turns: int = 0
    total_tokens: int = 0
    #: the largest request body a call of it sent, bytes: about its history's size
    history_bytes: int = 0
    log: EventLog = field(default_factory=EventLog)
    conversations: ConversationIndex = field(default_factory=ConversationIndex)
    #: where its last relayed body, written as orjson writes, began its conversation
    #: member (:func:`~rolltap.gateway.relay_splice.layout_of`)
    conversation_at: int | None = None
    #: its large request fields as last recorded (each recorded once while unchanged)
    kept_params: KeptParams = field(default_factory=KeptParams)
    intercepts: dict[str, Intercept] = field(default_factory=dict)
    closed: RolltapError | None = None
    #: raw request bodies kept only when the gateway's ``discard_intercepts`` is off
    retained: list[bytes] = field(default_factory=list)
    #: calls an SDK retry may repeat; made only once one failed, went undelivered or was keyed
    replays: ReplayBook | None = None
    created: float = field(default_factory=time.time)
    _started: float = field(default_factory=time.monotonic)
    _inflight: int = 0
    _next_call: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    @property
    def client(self) -> RelayClient:
        """The leased model client (shared: never closed by the rollout)."""
        return self.lease.client

    def slot(self) -> AbstractAsyncContextManager[None]:
        """A place among the endpoint's calls in flight, held for one upstream call."""
        return _UNCAPPED if self.limiter is None else self.limiter.slot()

    def check_secret(self, presented: str) -> bool:
        return tokens_match(presented, self.secret)

    def admit_call(self) -> None:
        """Count a call as a turn, or raise ``LimitReachedError`` if a limit is reached."""
        limits, hit = self.limits, None
        if limits.max_turns is not None and self.turns >= limits.max_turns:
            hit = "max_turns"
        elif limits.max_tokens is not None and self.total_tokens >= limits.max_tokens:
            hit = "max_tokens"
        elif limits.timeout_s is not None and time.monotonic() - self._started > limits.timeout_s:
            hit = "timeout"
        if hit is not None:
            self.limit_reached = self.limit_reached or hit
            raise LimitReachedError(f"rollout {self.id} reached its {hit} limit")
        self.turns += 1

    def admit_policy(self) -> None:
        """Note the policy epoch of the first call; refuse a later one with
        ``PolicyStaleError`` once the rollout is ``max_staleness`` versions old."""
        gate = self.gate
        if gate is None:
            return
        if self.first_epoch is None:
            self.first_epoch = gate.begin()
            return
        try:
            gate.check_fresh(self.first_epoch)
        except PolicyStaleError:
            self.stale = True
            raise

    def add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
            self.total_tokens += usage["total_tokens"]

    def next_call_id(self) -> str:
        """A new call's id (an intercept's, or a refused call's: ids never repeat)."""
        self._next_call += 1
        return f"{self.id}.{self._next_call}"

    def open_intercept(self) -> Intercept:
        if self.closed is not None:
            raise RolloutClosedError(f"rollout {self.id} is closed: {self.closed.message}")
        intercept = Intercept(self.next_call_id(), asyncio.current_task())
        self.intercepts[intercept.id] = intercept
        self._inflight += 1
        self._idle.clear()
        return intercept

    def discard(self, intercept: Intercept) -> None:
        """Drop a delivered (or failed) intercept; idempotent per intercept."""
        if intercept.discarded:
            return
        intercept.discarded = True
        self.intercepts.pop(intercept.id, None)
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()
            if self.closed is not None:
                self._release()

    def close(self, error: RolltapError) -> None:
        """Unblock and drop every undelivered intercept; the lease returns once they unwind."""
        if self.closed is not None:
            return
        self.closed = error
        self.retained.clear()
        pending = list(self.intercepts.values())
        self.intercepts.clear()
        for intercept in pending:
            intercept.cancel(error)
        if self.pin is not None:
            self.pin.unpin()
        if self._inflight == 0:
            self._release()

    def _release(self) -> None:
        self.lease.release()
        if self.pin is not None:
            self.pin.release()

    async def drained(self) -> None:
        """Wait until every in-flight call has unwound and recorded its outcome."""
        await self._idle.wait()
