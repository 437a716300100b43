"""Per-replica bookkeeping of a :class:`~rolltap.clients.replicas.ReplicaSet`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DownReason", "ReplicaState", "ReplicaStats"]

#: why a replica was marked down
DownReason = Literal["connect_refused", "connect_timeout"]


@dataclass(frozen=True, slots=True)
class ReplicaStats:
    """One replica's counters at one moment (for ``/stats`` and ``/metrics``)."""

    #: the URL without user info
    replica: str
    up: bool
    #: why it was last marked down, and the seconds left of its cool-off (0 when up)
    down_reason: DownReason | None
    down_for_s: float
    #: times it was marked down
    downs: int
    pinned_rollouts: int
    in_flight: int
    waiting: int
    #: calls started, calls that failed, calls refused for a full queue or a queue timeout
    calls: int
    errors: int
    rejected: int
    #: the calls' durations, slot held to done, seconds (0 before any ended)
    latency_mean_s: float
    latency_max_s: float
    latency_sum_s: float


@dataclass(slots=True)
class ReplicaState:
    """A replica's live state; only its :class:`ReplicaSet` changes it."""

    url: str
    label: str
    max_inflight: int | None
    pinned: int = 0
    in_flight: int = 0
    waiting: int = 0
    calls: int = 0
    errors: int = 0
    rejected: int = 0
    ended: int = 0
    latency_sum: float = 0.0
    latency_max: float = 0.0
    downs: int = 0
    #: the clock time its cool-off ends; None: never marked down
    down_until: float | None = None
    down_reason: DownReason | None = None
    slots: asyncio.Semaphore | None = field(init=False)

    def __post_init__(self) -> None:
        self.slots = None if self.max_inflight is None else asyncio.Semaphore(self.max_inflight)

    def is_up(self, now: float) -> bool:
        return self.down_until is None or now >= self.down_until

    def load(self) -> tuple[int, int]:
        """What least-loaded compares: rollouts pinned, then calls in flight."""
        return (self.pinned, self.in_flight)

    def back_at(self) -> float:
        """When its cool-off ends (``-inf`` for a replica never marked down)."""
        return float("-inf") if self.down_until is None else self.down_until

    def observe(self, seconds: float) -> None:
        """Record an ended call's duration."""
        self.ended += 1
        self.latency_sum += seconds
        self.latency_max = max(self.latency_max, seconds)

    def stats(self, now: float) -> ReplicaStats:
        up = self.is_up(now)
        return ReplicaStats(
            replica=self.label,
            up=up,
            down_reason=self.down_reason,
            down_for_s=0.0 if up or self.down_until is None else self.down_until - now,
            downs=self.downs,
            pinned_rollouts=self.pinned,
            in_flight=self.in_flight,
            waiting=self.waiting,
            calls=self.calls,
            errors=self.errors,
            rejected=self.rejected,
            latency_mean_s=self.latency_sum / self.ended if self.ended else 0.0,
            latency_max_s=self.latency_max,
            latency_sum_s=self.latency_sum,
        )
