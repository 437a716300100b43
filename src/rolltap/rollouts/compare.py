"""Summaries of stored runs (for ``rolltap compare``), rebuilt from sessions and events."""

from __future__ import annotations

from typing import Any

from rolltap.rollouts.results import RolloutResult, call_stats, failure_of
from rolltap.rollouts.summary import summarize
from rolltap.store import EventKind, Store

__all__ = ["summarize_run"]


async def summarize_run(store: Store, run_id: str) -> dict[str, Any]:
    """The same summary ``rolltap eval`` prints, for a run already in ``store``."""
    run = await store.get_run(run_id)
    stored = run.config.get("run")
    r = int(stored.get("r", 1)) if isinstance(stored, dict) else 1
    results: list[RolloutResult] = []
    for session in await store.list_sessions(run=run_id):
        result = RolloutResult(
            str(session.task.get("task_id", session.id)),
            int(session.task.get("sample", 0)),
            session.id,
            session.status,
            reward=session.reward,
        )
        events = await store.events(session.id)
        result.calls = call_stats(events)
        ended = [e.payload.get("error") for e in events if e.kind == EventKind.STATUS]
        failure = failure_of(session.status, events, str(ended[-1]) if ended else None)
        if failure is not None:
            result.error_code, result.error_message = failure
        results.append(result)
    summary = summarize(results, r=r)
    summary["name"] = run.name
    return summary
