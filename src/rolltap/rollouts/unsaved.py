"""What a run could not save: sessions whose final commit has not landed, with their logs.

In process, when the store gives up (``store_unavailable``) or fills up (``store_full``)
the run stops and these sessions (:class:`Unsaved`) go to ``rolltap-unsaved-<run>.jsonl``.
On serve workers, a rollout whose last commit failed so is appended, with its whole log
and how it ended, to ``rolltap-unsaved-<run>-w<worker>.jsonl`` (:class:`UnsavedFiles`):
one file per run and worker slot, so workers never write one file together, and a later
outage of the same run adds lines. ``rolltap sessions import FILE`` loads either (a
session partly stored is completed, importing twice stores nothing twice).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from rolltap.errors import StoreError
from rolltap.events import EventLog
from rolltap.exports import write_sessions
from rolltap.store import RunInfo, SessionInfo, StoreFullError, StoreUnavailableError

__all__ = ["Unsaved", "UnsavedFiles", "is_fatal", "unsaved_path"]


def is_fatal(err: StoreError) -> bool:
    """An error the store will not get over while the run waits: stop the run."""
    return isinstance(err, StoreUnavailableError | StoreFullError)


class Unsaved:
    """Sessions from their creation until their final commit lands."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[SessionInfo, EventLog]] = {}

    def track(self, session: SessionInfo, log: EventLog) -> None:
        """``session`` is stored; ``log`` is what it will hold."""
        self._open[session.id] = (session, log)

    def ended(self, session_id: str, log: EventLog, status: str, reward: float | None) -> None:
        """The rollout ended with ``status`` and ``reward``; its final commit is next."""
        session, _ = self._open[session_id]
        self._open[session_id] = (dataclasses.replace(session, status=status, reward=reward), log)

    def saved(self, session_id: str) -> None:
        """The final commit landed (or failed for a reason of its own)."""
        self._open.pop(session_id, None)

    def sessions(self) -> list[tuple[SessionInfo, EventLog]]:
        """Each session not saved, with its last known status and its log."""
        return list(self._open.values())


def unsaved_path(folder: str | Path | None, run_id: str, worker: int) -> Path:
    """Where worker ``worker`` keeps what it could not save of run ``run_id``."""
    return Path(folder or Path.cwd()) / f"rolltap-unsaved-{run_id}-w{worker}.jsonl"


class UnsavedFiles:
    """Appends a worker's unsaved sessions to their run's file."""

    def __init__(self, folder: str | None, worker: int) -> None:
        self._folder, self._worker = folder, worker
        # one append at a time: a line may take several writes, which must not interleave
        self._lock = asyncio.Lock()

    async def save(self, run_id: str, items: Sequence[tuple[SessionInfo, EventLog]]) -> Path:
        """Append ``items`` (sessions of run ``run_id``); the file. StoreError if it cannot."""
        async with self._lock:
            return await asyncio.to_thread(self._append, run_id, items)

    def _append(self, run_id: str, items: Sequence[tuple[SessionInfo, EventLog]]) -> Path:
        path = unsaved_path(self._folder, run_id, self._worker)
        # the run exists in the store (the supervisor created it): the import only
        # needs its id, and creates it with this name only if it is gone
        run = RunInfo(
            id=run_id, name=None, config={"source": "rolltap serve"}, created_at=time.time(),
            n_sessions=0, n_finished=0, n_failed=0, n_rewarded=0, reward_sum=0.0,
        )  # fmt: skip
        try:
            with path.open("ab") as out:
                write_sessions(out, run, items)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return path
