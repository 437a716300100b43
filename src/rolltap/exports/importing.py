"""``rolltap sessions import``: sessions from a JSONL export into a store.

A session written to ``rolltap-unsaved-<run>.jsonl`` while the database was away may be
partly stored (its incremental commits landed, the last ones did not), or stored whole
(the file imported before). Merging checks that the stored events are a prefix of the
file's (same seq, kind and time), then commits the rest with the file's status and
reward: importing twice stores each event once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import IO

from rolltap.events import Event, EventLog
from rolltap.exports.jsonl import read_jsonl
from rolltap.store import SessionInfo, Store, StoreConflictError

__all__ = ["import_jsonl", "merge_session"]


async def import_jsonl(
    store: Store,
    src: str | Path | IO[bytes],
    *,
    skip_existing: bool = False,
    merge: bool = False,
) -> int:
    """Import sessions written by :func:`~rolltap.exports.export_jsonl`; the number imported.

    Runs missing from the store are created with their exported id, name and
    config; forks arrive resolved (standalone sessions). A session already stored
    is a StoreConflictError, skipped with ``skip_existing``, or with ``merge``
    brought up to the file (the events it lacks appended, status and reward set;
    counted only if something changed), so importing twice stores each event once.
    """
    imported = 0
    async for run, session, events in read_jsonl(src):
        existing_ok = skip_existing or merge
        if await store.import_session(run, session, events, existing_ok=existing_ok):
            imported += 1
        elif merge:
            imported += await merge_session(store, session, events)
    return imported


async def merge_session(store: Store, session: SessionInfo, imported: Sequence[Event]) -> bool:
    """Bring the stored ``session`` up to the imported one; whether anything changed."""
    stored = await store.get_session(session.id)
    if stored.run_id != session.run_id:
        raise StoreConflictError(
            f"session {session.id} is stored in run {stored.run_id}, not {session.run_id}"
        )
    history = await store.events(session.id)
    if len(history) > len(imported):
        raise StoreConflictError(
            f"session {session.id}: {len(history)} events stored, only {len(imported)} imported"
        )
    for event, new in zip(history, imported, strict=False):
        if (event.seq, event.kind, event.ts) != (new.seq, new.kind, new.ts):
            raise StoreConflictError(
                f"session {session.id}: stored event {event.seq} differs from the imported one"
            )
    same_end = (stored.status, stored.reward) == (session.status, session.reward)
    if len(history) == len(imported) and same_end:
        return False
    log = EventLog.from_events(imported)
    try:
        await store.commit(session.id, log, status=session.status, reward=session.reward)
    finally:
        store.forget(session.id)
    return True
