"""A point-in-time view of a model-client pool, safe to log (no keys, no credentials)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["PoolSnapshot"]


@dataclass(frozen=True, slots=True)
class PoolSnapshot:
    """Counts describing a :class:`~rolltap.pool.ModelClientPool` at one moment.

    ``clients + closing + building`` never exceeds ``max_clients``; injected clients are
    counted separately and take no slot.

    >>> PoolSnapshot(clients=2, closing=1, leases=3, max_clients=4).as_dict()["closing"]
    1
    """

    #: live pool-owned clients (constructed, not closing), leased or idle
    clients: int = 0
    #: evicted or shut-down clients whose ``aclose()`` has not finished (they hold a slot)
    closing: int = 0
    #: active (unreleased) leases, on owned and injected clients alike
    leases: int = 0
    #: the bound on pool-owned client instances
    max_clients: int = 64
    #: constructions started since the pool was created (failed ones included)
    constructions: int = 0
    #: idle clients evicted to make room for a new key
    evictions: int = 0
    #: client closes that raised (eviction or shutdown)
    close_failures: int = 0
    #: externally owned clients lent by the pool, never closed by it
    injected: int = 0
    #: constructions in progress (they hold a slot)
    building: int = 0
    #: borrowers waiting for a construction (or for the close that frees its slot)
    waiting: int = 0
    #: whether ``aclose()`` has been called (admission stopped)
    closed: bool = False

    def as_dict(self) -> dict[str, int | bool]:
        """The snapshot as a plain dict, e.g. for a stats endpoint or a log line."""
        return asdict(self)
