"""What a run could not save: sessions whose final commit has not landed, with their logs.

When the store gives up (``store_unavailable``) or fills up (``store_full``) the run stops
and these sessions go to ``rolltap-unsaved-<run>.jsonl`` (``rolltap sessions import``).
"""

from __future__ import annotations

import dataclasses

from rolltap.errors import StoreError
from rolltap.events import EventLog
from rolltap.store import SessionInfo, StoreFullError, StoreUnavailableError

__all__ = ["Unsaved", "is_fatal"]


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
