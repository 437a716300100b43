"""Importing into sessions that already exist: append what is missing, nothing twice.

A session written to ``rolltap-unsaved-<run>.jsonl`` while the database was away may be
partly stored (its incremental commits landed, the last ones did not), or stored whole
(the file imported before). Merging checks that the stored events are a prefix of the
file's (same seq, kind and time), then commits the rest with the file's status and
reward: importing twice stores each event once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rolltap.events import Event, EventLog
from rolltap.store.errors import StoreConflictError
from rolltap.store.models import CommitResult, SessionInfo
from rolltap.store.serialize import row_event

__all__ = ["merge_session"]


class _Target(Protocol):
    async def get_session(self, session_id: str) -> SessionInfo: ...

    async def events(self, session_id: str) -> list[Event]: ...

    async def commit(
        self, session_id: str, log: EventLog, *, status: str | None, reward: float | None
    ) -> CommitResult: ...

    def forget(self, session_id: str) -> None: ...


async def merge_session(
    store: _Target, session: SessionInfo, rows: Sequence[dict[str, Any]]
) -> bool:
    """Bring the stored ``session`` up to the imported one; whether anything changed."""
    stored = await store.get_session(session.id)
    if stored.run_id != session.run_id:
        raise StoreConflictError(
            f"session {session.id} is stored in run {stored.run_id}, not {session.run_id}"
        )
    history = await store.events(session.id)
    if len(history) > len(rows):
        raise StoreConflictError(
            f"session {session.id}: {len(history)} events stored, only {len(rows)} imported"
        )
    for event, row in zip(history, rows, strict=False):
        if (event.seq, event.kind, event.ts) != (row["seq"], row["kind"], row["ts"]):
            raise StoreConflictError(
                f"session {session.id}: stored event {event.seq} differs from the imported one"
            )
    same_end = (stored.status, stored.reward) == (session.status, session.reward)
    if len(history) == len(rows) and same_end:
        return False
    log = EventLog.from_events(row_event(r["seq"], r["kind"], r["ts"], r["payload"]) for r in rows)
    try:
        await store.commit(session.id, log, status=session.status, reward=session.reward)
    finally:
        store.forget(session.id)
    return True
