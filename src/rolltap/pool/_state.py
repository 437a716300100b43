"""The pool's internal bookkeeping records (not public API)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic

from rolltap.pool.lease import C, Lease

__all__ = ["Build", "Close", "Entry"]


@dataclass(eq=False, slots=True)
class Entry(Generic[C]):
    """A live client under one key; ``leases`` counts the unreleased leases on it."""

    key: str
    client: C
    injected: bool
    leases: int = 0


@dataclass(eq=False, slots=True)
class Build(Generic[C]):
    """One coalesced construction of a key and the borrowers waiting for it.

    ``task`` is ``None`` while the construction waits for an evicted client's close to
    free the slot it will use.
    """

    key: str
    build: Callable[[], Awaitable[C]]
    waiters: list[tuple[asyncio.Future[Lease[C]], str]] = field(default_factory=list)
    task: asyncio.Task[C] | None = None

    def waiting(self) -> int:
        """How many borrowers still wait (cancelled ones excluded)."""
        return sum(1 for fut, _ in self.waiters if not fut.done())

    def fail(self, error: BaseException) -> None:
        """Hand ``error`` to every borrower still waiting."""
        for fut, _ in self.waiters:
            if not fut.done():
                fut.set_exception(error)


@dataclass(eq=False, slots=True)
class Close(Generic[C]):
    """A client being closed; ``successor`` is the construction its slot is promised to."""

    entry: Entry[C]
    successor: Build[C] | None
