"""What the store hands back: runs, sessions, commit results; and the status check.

The statuses themselves are the results vocabulary (:mod:`rolltap.results.statuses`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rolltap.events import ID_LENGTH
from rolltap.results.statuses import STATUSES
from rolltap.store.errors import StoreValidationError
from rolltap.store.schema import NODE_ID_LENGTH, WORKER_ID_LENGTH

__all__ = [
    "CommitResult",
    "RunInfo",
    "SessionInfo",
    "check_attempt",
    "check_id",
    "check_placement",
    "check_status",
]


def check_status(status: str) -> str:
    """``status`` if known, else :class:`StoreValidationError`."""
    if status not in STATUSES:
        raise StoreValidationError(
            f"unknown session status {status!r}; expected one of {sorted(STATUSES)}"
        )
    return status


def check_id(value: str, what: str) -> str:
    """A non-empty id of at most 64 characters."""
    if not value or len(value) > ID_LENGTH:
        raise StoreValidationError(f"{what} id must have 1..{ID_LENGTH} characters")
    return value


def check_placement(node_id: str | None, worker_id: str | None) -> tuple[str | None, str | None]:
    """A session's (node id, worker id): each None, or non-empty within its column's length.

    >>> check_placement("node-a", "w3")
    ('node-a', 'w3')
    """
    for value, what, most in ((node_id, "node", NODE_ID_LENGTH),
                              (worker_id, "worker", WORKER_ID_LENGTH)):  # fmt: skip
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= most):
            raise StoreValidationError(f"{what} id must be None or 1..{most} characters")
    return node_id, worker_id


def check_attempt(attempt: int, retry_of: str | None) -> tuple[int, str | None]:
    """A session's (attempt, retry_of): attempt 0 repeats nothing; a later attempt
    (``rolltap eval --retry-failed``) names the session it repeats.

    >>> check_attempt(2, "s1"), check_attempt(0, None)
    ((2, 's1'), (0, None))
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or not 0 <= attempt < 2**31:
        raise StoreValidationError(f"attempt must be an integer in 0..{2**31 - 1}")
    if (attempt == 0) != (retry_of is None):
        raise StoreValidationError("attempt 0 repeats no session; a later attempt names one")
    if retry_of is not None:
        check_id(retry_of, "retry_of session")
    return attempt, retry_of


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A named batch of rollouts with its config and counts, kept current by every commit."""

    id: str
    name: str | None
    config: Mapping[str, Any]
    created_at: float
    n_sessions: int
    n_finished: int
    n_failed: int
    n_rewarded: int
    reward_sum: float
    #: interrupted sessions (in ``n_finished`` and ``n_failed`` too): stored so by the
    #: run's next owner, or read so because their owner's lease expired
    n_interrupted: int = 0
    #: the eval set the run belongs to (``rolltap eval-set``; None: none)
    set_id: str | None = None

    @property
    def mean_reward(self) -> float | None:
        """Mean reward over sessions that have one; None when none has."""
        return self.reward_sum / self.n_rewarded if self.n_rewarded else None

    @property
    def retries(self) -> int:
        """How many ``rolltap eval --retry-failed`` passes ran: once one did, the run's
        sessions hold attempts and its summary counts one per (task, sample)."""
        passes = self.config.get("retries")
        return len(passes) if isinstance(passes, list) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "config": self.config,
            "created_at": self.created_at,
            "n_sessions": self.n_sessions,
            "n_finished": self.n_finished,
            "n_failed": self.n_failed,
            "n_interrupted": self.n_interrupted,
            "mean_reward": self.mean_reward,
            "retries": self.retries,
            "set_id": self.set_id,
        }


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One rollout. ``n_events`` counts its whole history, a fork's inherited prefix included."""

    id: str
    run_id: str
    user: str | None
    task: Mapping[str, Any]
    status: str
    created_at: float
    updated_at: float
    n_events: int
    reward: float | None
    parent_id: str | None
    fork_at: int | None
    #: the node and the worker that ran it, as its owner said (None: not said)
    node_id: str | None = None
    worker_id: str | None = None
    #: ``rolltap eval --retry-failed``: which attempt of its (task, sample) this is (0: the
    #: first) and the session it repeats (None for attempt 0)
    attempt: int = 0
    retry_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "user": self.user,
            "task": self.task,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "n_events": self.n_events,
            "reward": self.reward,
            "parent_id": self.parent_id,
            "fork_at": self.fork_at,
            "node_id": self.node_id,
            "worker_id": self.worker_id,
            "attempt": self.attempt,
            "retry_of": self.retry_of,
        }


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What one :meth:`Store.commit` did.

    ``written`` events were inserted; ``replaced`` says the persisted history was
    replaced rather than extended; ``noop`` says no statement was issued at all.
    """

    session_id: str
    n_events: int
    written: int
    replaced: bool
    noop: bool
