"""Storing how a rollout ended when no runner did it: refused, cancelled early, lost.

The runner stores every rollout it runs. These cover the rest: a worker that could not
start a rollout (an unknown harness) or saw it cancelled before it began, and the
supervisor marking the rollouts of a dead worker ``worker_lost``. Each writes the same
final ``status`` event the runner does, after whatever the session already holds.
"""

from __future__ import annotations

from typing import Any

from rolltap.errors import StoreError
from rolltap.events import EventKind, EventLog
from rolltap.rollouts.recorder import SessionStore
from rolltap.rollouts.tasks import Task
from rolltap.store import Store, StoreConflictError, StoreNotFoundError

__all__ = ["session_task", "store_lost", "store_outcome", "terminal_result"]


def session_task(task: Task, sample: int) -> dict[str, Any]:
    """The session ``task`` document, as the runner writes it."""
    return {"task_id": task.id, "sample": sample, "task": task.to_dict()}


def terminal_result(
    task: Task, sample: int, session_id: str, status: str, error: str | None
) -> dict[str, Any]:
    """A result for a rollout that ended without running (the runner's result shape)."""
    return {
        "task_id": task.id,
        "sample": sample,
        "session_id": session_id,
        "status": status,
        "reward": None,
        "answer": None,
        "error": error,
        "components": {},
        "calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "no_model_calls": False,
    }


def _status_event(log: EventLog, status: str, error: str | None) -> None:
    log.append(EventKind.STATUS, {"status": status, "error": error, "limit": None})


async def store_outcome(
    store: SessionStore,
    *,
    run_id: str,
    session_id: str,
    task: Task,
    sample: int,
    user: str | None,
    status: str,
    error: str | None,
    attempt: int = 0,
    retry_of: str | None = None,
) -> None:
    """Create the rollout's session (a later ``attempt`` of ``retry_of`` when it is one)
    and store its only event: how it ended."""
    await store.create_session(
        run_id, session_id=session_id, user=user, task=session_task(task, sample),
        attempt=attempt, retry_of=retry_of,
    )  # fmt: skip
    log = EventLog()
    _status_event(log, status, error)
    await store.commit(session_id, log, status=status)
    store.forget(session_id)


async def store_lost(
    store: Store,
    *,
    run_id: str,
    session_id: str,
    task: Task,
    sample: int,
    user: str | None,
    status: str,
    error: str,
    attempt: int = 0,
    retry_of: str | None = None,
) -> None:
    """End a session its worker can no longer write: append the status, keep the rest.

    The dead worker may have committed part of the history (or nothing, not even the
    session). Its last commit may still land after we read: then the append conflicts
    and is retried once on the history as it is now.
    """
    for tries in range(2):
        try:
            log = await store.load_log(session_id)
        except StoreNotFoundError:
            await store_outcome(
                store, run_id=run_id, session_id=session_id, task=task, sample=sample,
                user=user, status=status, error=error, attempt=attempt, retry_of=retry_of,
            )  # fmt: skip
            return
        _status_event(log, status, error)
        store.forget(session_id)  # the prefix is what we just read, not what we remember
        try:
            await store.commit(session_id, log, status=status)
        except StoreConflictError:
            if tries:
                raise
            continue
        finally:
            store.forget(session_id)
        return
    raise StoreError(f"could not mark session {session_id} {status}")
