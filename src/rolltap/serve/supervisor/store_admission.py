"""Whether the store can take new rollouts: admission's view of every writer.

A rollout's session is created in the store before it starts, so a batch admitted while
the database is away could not start (and would hold its caller until the store gave
up). Admission refuses new batches instead, with the retryable ``503 store_unavailable``
and a ``Retry-After``, while the rollouts in flight go on: their writes are held by their
writer (bounded by ``ROLLTAP_STORE_PENDING_MAX_BYTES``) until the database is back.

It is unavailable when the supervisor's store answers no probe, when its writer is
reconnecting or over its pending-bytes bound, or when any ready worker's own writer
(PostgreSQL, MySQL: each worker writes) says so in its last ``store_state`` frame.
It is full (``507 store_full``) for ``FULL_HOLD_S`` after any of those writers last
failed a write because the database or its disk is full: waiting alone does not free
space, and a batch admitted then would only add sessions to the unsaved files.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rolltap.serve.protocol import store_report
from rolltap.store import Store, StoreFullError, StoreUnavailableError

__all__ = ["StoreAdmission"]

#: how often the supervisor probes a server database, and how long a probe may take
PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 2.0
#: what a refused caller is told to wait before retrying
RETRY_AFTER_S = 5.0
#: how long after a ``store_full`` failure new batches are refused (a batch admitted
#: after it finds out again, and renews it, when there is still no space)
FULL_HOLD_S = 30.0


class StoreAdmission:
    """Admission's answer to "can the store take a new batch?" (see the module docstring).

    ``workers`` yields each ready worker's last ``store_state`` (empty when it has none).
    """

    def __init__(self, store: Store, workers: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self._store, self._workers = store, workers
        self._probe = store.backend != "sqlite"  # a SQLite file has no server to lose
        #: since when the last probes failed (monotonic; None: the last one answered)
        self._probe_down_since: float | None = None
        self.refused = 0

    def _note_probe(self, ok: bool) -> None:
        if ok:
            self._probe_down_since = None
        elif self._probe_down_since is None:
            self._probe_down_since = time.monotonic()

    async def watch(self) -> None:
        """Probe the database every second, so ``/status`` is true while nobody writes."""
        if not self._probe:
            return
        while True:
            self._note_probe(await self._store.ping(PROBE_TIMEOUT_S))
            await asyncio.sleep(PROBE_INTERVAL_S)

    def state(self) -> dict[str, Any]:
        """``available`` and why not: the supervisor's writer, the probe, the workers'."""
        own = store_report(self._store.stats(), self._store.pending_max_bytes)
        reports = [own, *(w for w in self._workers() if w)]
        down = [r["unavailable_s"] for r in reports if r.get("unavailable_s") is not None]
        if self._probe_down_since is not None:
            down.append(round(time.monotonic() - self._probe_down_since, 1))
        over = any(r.get("over") for r in reports)
        full = [r["full_s"] for r in reports if r.get("full_s") is not None]
        full_s = min(full) if full else None
        is_full = full_s is not None and full_s < FULL_HOLD_S
        return {
            "available": not down and not over and not is_full,
            "unavailable_s": max(down) if down else None,
            "pending_commits": sum(int(r.get("pending_commits") or 0) for r in reports),
            "pending_bytes": sum(int(r.get("pending_bytes") or 0) for r in reports),
            "over_pending_bound": over,
            "full": is_full,
            "full_s": full_s,
            "rejected": self.refused,
        }

    async def admit(self) -> None:
        """Return if a new batch may start; else ``StoreUnavailableError`` (503, retryable)."""
        if self._probe:
            self._note_probe(await self._store.ping(PROBE_TIMEOUT_S))
        state = self.state()
        if state["available"]:
            return
        self.refused += 1
        if state["full"]:
            raise StoreFullError(
                f"the store is full (a write failed {state['full_s']:g} s ago): free space; "
                "rollouts in flight go on (what cannot be stored goes to the unsaved files), "
                "new batches are refused",
                retry_after=FULL_HOLD_S,
            )
        if state["unavailable_s"] is not None:
            why = f"the store is unreachable (for {state['unavailable_s']:g} s)"
        else:
            why = "the store's pending writes are over ROLLTAP_STORE_PENDING_MAX_BYTES"
        raise StoreUnavailableError(
            f"{why}: rollouts in flight go on, new batches are refused; retry later",
            retry_after=RETRY_AFTER_S,
        )
