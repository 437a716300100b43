"""Rollouts pinned to inference replicas, so each agent's turns reuse one prefix cache.

A :class:`ReplicaSet` holds the replicas of one endpoint (its ``replicas`` URLs) for one
gateway; with several workers each balances its own rollouts. It does no I/O: the
gateway asks it where a call goes and tells it how the call went.

* :meth:`~ReplicaSet.register` pins a rollout, for its life, to the least-loaded replica
  that is up: fewest rollouts pinned, then fewest calls in flight, then the first listed.
  :meth:`~ReplicaSet.release` unpins it when the rollout ends.
* :meth:`~ReplicaSet.call` wraps one upstream call: it picks the rollout's replica, waits
  for one of that replica's ``max_inflight`` slots (a bounded FIFO, like the endpoint's
  cap: ``upstream_busy`` when full or too slow), and counts the call, its latency and
  whether it failed.
* A call that fails because the replica refused the connection or did not accept it in
  time (:func:`down_reason`) marks the replica down for ``cooloff_s``: new rollouts avoid
  it, and a rollout pinned to it is re-pinned to another replica at its *next* call. The
  failed call itself is never retried; it fails to the harness. The re-pin comes back
  as a :class:`Repin`, to record as a ``note`` event (:meth:`Repin.note`).
* :meth:`~ReplicaSet.snapshot` gives per-replica calls, errors, latency and pinned
  rollouts for ``/stats`` and ``/metrics``.

The clock is injectable, so tests move time instead of sleeping. Replicas are named by
their URL with any ``user:password@`` removed (:func:`replica_label`) wherever they leave
this module, so stats and notes never carry a credential.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rolltap.clients.relay import ROLLOUT_HEADER, ROUTING_HEADERS
from rolltap.clients.replica_state import DownReason, ReplicaState, ReplicaStats
from rolltap.config import EndpointConfig
from rolltap.errors import (
    ConfigError,
    UpstreamBusyError,
    UpstreamConnectionError,
    UpstreamTimeoutError,
)

__all__ = [
    "DownReason",
    "Repin",
    "ReplicaCall",
    "ReplicaSet",
    "ReplicaStats",
    "down_reason",
    "replica_label",
    "routing_headers",
]

# How far down an exception's cause chain down_reason looks.
_CHAIN_DEPTH = 8


def routing_headers(rollout: str) -> dict[str, str]:
    """The headers naming ``rollout`` on every upstream call, so that a router in front of
    the replicas (vllm-router's consistent hash, SGLang's router) can pin it too."""
    return {ROLLOUT_HEADER: rollout, **dict.fromkeys(ROUTING_HEADERS, rollout)}


def replica_label(url: str) -> str:
    """``url`` without user info: how a replica is named in stats, notes and logs.

    >>> replica_label("http://user:secret@10.0.0.7:8000/v1")
    'http://10.0.0.7:8000/v1'
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def down_reason(exc: BaseException) -> DownReason | None:
    """Whether ``exc`` (or an error it was raised from) means the replica is unreachable:
    ``connect_refused`` (refused, unresolvable, no route), ``connect_timeout``, else None.

    TLS failures are not "down": every replica of a misconfigured endpoint would fail alike.
    """
    seen: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if seen is None:
            return None
        if isinstance(seen, UpstreamTimeoutError) and seen.connecting:
            return "connect_timeout"
        if isinstance(seen, UpstreamConnectionError):
            cause = seen.__cause__
            if cause is None or isinstance(cause, ConnectionRefusedError):
                return "connect_refused"
            if isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError):
                return "connect_refused"  # unresolvable, no route
            return None
        if isinstance(seen, ConnectionRefusedError):
            return "connect_refused"
        seen = seen.__cause__ or seen.__context__
    return None


@dataclass(frozen=True, slots=True)
class Repin:
    """A rollout moved off a down replica at the start of a call."""

    rollout: str
    #: the replicas' labels (:func:`replica_label`)
    from_replica: str
    to_replica: str
    reason: DownReason

    def note(self) -> dict[str, Any]:
        """The ``note`` event's payload: ``{"text": "repinned", "data": {from, to, reason}}``."""
        data = {"from": self.from_replica, "to": self.to_replica, "reason": self.reason}
        return {"text": "repinned", "data": data}


@dataclass(slots=True)
class ReplicaCall:
    """One call in flight on :attr:`replica` (yielded by :meth:`ReplicaSet.call`)."""

    #: the replica's URL, as configured (build its client from it)
    replica: str
    #: set when this call moved the rollout off a down replica
    repin: Repin | None
    _owner: ReplicaSet
    _failed: bool = False

    @property
    def label(self) -> str:
        """The replica's URL without user info."""
        return replica_label(self.replica)

    def failed(self, exc: BaseException | None = None) -> DownReason | None:
        """Count this call as an error (once); mark the replica down when ``exc`` says it
        is unreachable. Call it for failures handled inside the ``async with`` (an error
        status, an error delivered to the harness); an exception that leaves the block is
        counted without it. Returns the down reason, if any."""
        reason = down_reason(exc) if exc is not None else None
        if not self._failed:
            self._failed = True
            self._owner._replica(self.replica).errors += 1
        if reason is not None:
            self._owner.mark_down(self.replica, reason)
        return reason


class ReplicaSet:
    """The replicas of one endpoint and the rollouts pinned to them (see the module).

    ``max_inflight`` caps the calls in flight on *each* replica; a call over it waits in
    a FIFO of at most ``max_queued`` for ``queue_timeout_s`` at most, then fails with the
    retryable ``upstream_busy``.
    """

    def __init__(
        self,
        replicas: Sequence[str],
        *,
        max_inflight: int | None = None,
        cooloff_s: float = 10.0,
        max_queued: int = 4096,
        queue_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not replicas:
            raise ConfigError("a replica set needs at least one replica")
        if len(set(replicas)) != len(replicas):
            raise ConfigError("replicas must be distinct URLs")
        if max_inflight is not None and max_inflight <= 0:
            raise ConfigError(f"max_inflight must be positive, got {max_inflight}")
        self.cooloff_s = cooloff_s
        self.max_inflight = max_inflight
        self.max_queued = max_queued
        self.queue_timeout_s = queue_timeout_s
        self._clock = clock
        self._replicas = {
            url: ReplicaState(url, replica_label(url), max_inflight) for url in replicas
        }
        self._pins: dict[str, str] = {}
        # re-pins whose call failed to get a slot, reported with the rollout's next call
        self._unreported: dict[str, Repin] = {}
        self.repins = 0

    @classmethod
    def for_endpoint(
        cls, endpoint: EndpointConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> ReplicaSet:
        """The set for ``endpoint``'s replicas (its ``base_url`` alone when it has none);
        its ``max_inflight`` caps each replica, and so does its ``max_connections``: a
        call then never waits inside a client's connection pool, where it would wait
        for the busiest replica however free the others are."""
        cap = min(endpoint.max_inflight or endpoint.max_connections, endpoint.max_connections)
        return cls(
            endpoint.replica_urls,
            max_inflight=cap,
            cooloff_s=endpoint.replica_cooloff_s,
            max_queued=endpoint.max_queued,
            queue_timeout_s=endpoint.inflight_timeout_s,
            clock=clock,
        )

    @property
    def replicas(self) -> tuple[str, ...]:
        """The replicas' URLs, in configured order."""
        return tuple(self._replicas)

    def _replica(self, url: str) -> ReplicaState:
        replica = self._replicas.get(url)
        if replica is None:
            raise KeyError(f"not a replica of this set: {replica_label(url)}")
        return replica

    # -- health ---------------------------------------------------------------------------

    def is_up(self, url: str) -> bool:
        """False while ``url`` is within its cool-off after being marked down."""
        return self._replica(url).is_up(self._clock())

    def mark_down(self, url: str, reason: DownReason) -> None:
        """Mark ``url`` down for ``cooloff_s`` from now (again: the cool-off restarts)."""
        replica = self._replica(url)
        replica.down_until = self._clock() + self.cooloff_s
        replica.down_reason = reason
        replica.downs += 1

    # -- pinning --------------------------------------------------------------------------

    def _least_loaded(self) -> ReplicaState | None:
        now = self._clock()
        up = [r for r in self._replicas.values() if r.is_up(now)]
        return min(up, key=ReplicaState.load, default=None)

    def register(self, rollout: str) -> str:
        """Pin ``rollout`` (if it is not yet) and return its replica's URL.

        With every replica down it goes to the one whose cool-off ends first."""
        pinned = self._pins.get(rollout)
        if pinned is not None:
            return pinned
        choice = self._least_loaded() or min(self._replicas.values(), key=ReplicaState.back_at)
        choice.pinned += 1
        self._pins[rollout] = choice.url
        return choice.url

    def release(self, rollout: str) -> None:
        """Unpin ``rollout`` (its end); unknown or released rollouts are ignored."""
        self._unreported.pop(rollout, None)
        url = self._pins.pop(rollout, None)
        if url is not None:
            self._replicas[url].pinned -= 1

    def pinned(self, rollout: str) -> str | None:
        """The URL ``rollout`` is pinned to, or None."""
        return self._pins.get(rollout)

    def route(self, rollout: str) -> tuple[str, Repin | None]:
        """Where ``rollout``'s next call goes: its replica, re-pinned first when that one
        is down and another is up (the :class:`Repin` says so). Registers it if needed."""
        url = self.register(rollout)
        current = self._replicas[url]
        now = self._clock()
        if current.is_up(now):
            return url, None
        target = self._least_loaded()  # never the current one: it is down
        if target is None:
            return url, None  # nowhere better: the call goes and fails (or finds it back)
        assert current.down_reason is not None
        current.pinned -= 1
        target.pinned += 1
        self._pins[rollout] = target.url
        self.repins += 1
        return target.url, Repin(rollout, current.label, target.label, current.down_reason)

    # -- calls ----------------------------------------------------------------------------

    @asynccontextmanager
    async def call(self, rollout: str) -> AsyncIterator[ReplicaCall]:
        """One upstream call of ``rollout``: route it, hold a slot, count it.

        An exception leaving the block counts as an error and, when :func:`down_reason`
        names one, marks the replica down (the exception propagates: no retry)."""
        url, repin = self.route(rollout)
        replica = self._replicas[url]
        try:
            await self._acquire(replica)
        except UpstreamBusyError:
            if repin is not None:  # the pin moved all the same: report it with the next call
                self._unreported[rollout] = repin
            raise
        repin = repin or self._unreported.pop(rollout, None)
        started = self._clock()
        replica.in_flight += 1
        replica.calls += 1
        call = ReplicaCall(url, repin, self)
        try:
            yield call
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError | GeneratorExit):
                call.failed(exc)
            raise
        finally:
            replica.in_flight -= 1
            replica.observe(self._clock() - started)
            if replica.slots is not None:
                replica.slots.release()

    async def _acquire(self, replica: ReplicaState) -> None:
        slots = replica.slots
        if slots is None:
            return
        if slots.locked() and replica.waiting >= self.max_queued:
            replica.rejected += 1
            raise UpstreamBusyError(
                f"{replica.waiting} calls already wait for replica {replica.label}",
                retry_after=1.0,
            )
        replica.waiting += 1
        try:
            async with asyncio.timeout(self.queue_timeout_s):
                await slots.acquire()
        except TimeoutError:
            replica.rejected += 1
            raise UpstreamBusyError(
                f"no slot on replica {replica.label} within {self.queue_timeout_s:g} s",
                retry_after=1.0,
            ) from None
        finally:
            replica.waiting -= 1

    # -- stats ----------------------------------------------------------------------------

    def stats(self) -> list[ReplicaStats]:
        """Each replica's counters now, in configured order."""
        now = self._clock()
        return [replica.stats(now) for replica in self._replicas.values()]

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready stats: ``{"replicas": [ReplicaStats as dicts], "rollouts": N,
        "repins": N, "max_inflight": N|None, "cooloff_s": S}``."""
        return {
            "replicas": [asdict(stats) for stats in self.stats()],
            "rollouts": len(self._pins),
            "repins": self.repins,
            "max_inflight": self.max_inflight,
            "cooloff_s": self.cooloff_s,
        }
