"""Per-rollout limits and the per-endpoint cap on calls in flight."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from rolltap.errors import ConfigError, UpstreamBusyError

__all__ = ["InflightLimiter", "RolloutLimits"]


@dataclass(frozen=True, slots=True)
class RolloutLimits:
    """Bounds the gateway enforces on one rollout.

    A call past a limit gets a clean ``429 limit_reached`` error in the harness's dialect
    and the rollout is marked (``Rollout.limit_reached``). ``max_tokens`` counts the
    upstream's reported total tokens over the rollout's calls so far; ``timeout_s`` is
    wall-clock time since registration.
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens", "timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"limits.{name} must be positive, got {value}")


class InflightLimiter:
    """At most ``limit`` upstream calls at once; the rest wait in a bounded FIFO.

    A call that finds ``max_queued`` calls already waiting, or waits longer than
    ``timeout`` seconds, fails with the retryable ``upstream_busy`` (429) instead of
    queueing forever, so thousands of rollouts cannot stampede a small upstream.
    """

    def __init__(self, limit: int, *, max_queued: int, timeout: float) -> None:
        self.limit = limit
        self.max_queued = max_queued
        self.timeout = timeout
        self.in_flight = 0
        self.peak = 0
        self.waiting = 0
        # asyncio.Semaphore wakes waiters in arrival order: the FIFO.
        self._slots = asyncio.Semaphore(limit)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._slots.locked() and self.waiting >= self.max_queued:
            raise UpstreamBusyError(
                f"{self.waiting} calls already wait for the upstream", retry_after=1.0
            )
        self.waiting += 1
        try:
            async with asyncio.timeout(self.timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamBusyError(
                f"no upstream slot within {self.timeout:g} s", retry_after=1.0
            ) from None
        finally:
            self.waiting -= 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            self._slots.release()

    def snapshot(self) -> dict[str, int]:
        return {
            "limit": self.limit,
            "in_flight": self.in_flight,
            "peak": self.peak,
            "waiting": self.waiting,
        }
