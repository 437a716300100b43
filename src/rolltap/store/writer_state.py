"""What the serial writer reports about itself, its memory bound, and its test hooks."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rolltap.errors import ConfigError, StoreError
from rolltap.store.ops import WriteOp

__all__ = [
    "DEFAULT_PENDING_MAX_BYTES",
    "DEFAULT_UNAVAILABLE_TIMEOUT_S",
    "PENDING_ENV",
    "InjectedFault",
    "WriterHooks",
    "WriterStats",
    "env_pending_max_bytes",
]

#: environment variable bounding the bytes of writes held while the database is away
PENDING_ENV = "ROLLTAP_STORE_PENDING_MAX_BYTES"
DEFAULT_PENDING_MAX_BYTES = 256 * 2**20
#: how long the database may stay unreachable before pending writes fail
DEFAULT_UNAVAILABLE_TIMEOUT_S = 300.0


def env_pending_max_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The pending-bytes bound: ``ROLLTAP_STORE_PENDING_MAX_BYTES``, else 256 MiB.

    >>> env_pending_max_bytes({"ROLLTAP_STORE_PENDING_MAX_BYTES": "1048576"})
    1048576
    """
    text = (os.environ if environ is None else environ).get(PENDING_ENV, "").strip()
    if not text:
        return DEFAULT_PENDING_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{PENDING_ENV}={text!r}: not a whole number of bytes") from None
    if value <= 0:
        raise ConfigError(f"{PENDING_ENV}={text!r}: must be positive")
    return value


class InjectedFault(StoreError):
    """Raised by :class:`WriterHooks` in tests. ``transient`` faults act like a lost connection."""

    code = "store_injected_fault"

    def __init__(self, message: str = "injected fault", *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class WriterHooks:
    """Fault-injection points for tests; the default does nothing.

    >>> class LoseAck(WriterHooks):
    ...     async def after_commit(self, ops: Sequence[WriteOp]) -> None:
    ...         raise InjectedFault("ack lost", transient=True)
    """

    async def before_commit(self, ops: Sequence[WriteOp]) -> None:
        """Inside the transaction, after the writes, before COMMIT."""

    async def after_commit(self, ops: Sequence[WriteOp]) -> None:
        """After COMMIT returned, before callers are told (raise a *transient* fault here:
        the writes landed, so only the verify-and-retry path is correct)."""


@dataclass(frozen=True, slots=True)
class WriterStats:
    """The writer's counters and health, e.g. for a progress line.

    ``pending_commits``/``pending_bytes``: event commits accepted and not yet durable;
    ``unavailable_s``: how long the database has been unreachable (``None``: it is not);
    ``full_s``: how long ago a write last failed with ``store_full`` (``None``: never).
    """

    queued: int
    transactions: int
    writes: int
    reconnects: int
    pending_commits: int = 0
    pending_bytes: int = 0
    unavailable_s: float | None = None
    full_s: float | None = None

    def describe(self) -> str | None:
        """``store unavailable for 12 s, 34 commits pending``; ``None`` while reachable.

        >>> WriterStats(0, 0, 0, 0, 34, 9000, 12.3).describe()
        'store unavailable for 12 s, 34 commits pending'
        """
        if self.unavailable_s is None:
            return None
        return (
            f"store unavailable for {self.unavailable_s:.0f} s, "
            f"{self.pending_commits} commits pending"
        )
