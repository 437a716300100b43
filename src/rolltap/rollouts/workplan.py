"""What ``--resume`` reruns: every (task, sample) without a ``completed`` or
``limit_reached`` session. Sessions of those that did not finish are deleted first, so
each (task id, sample index) ends with exactly one session."""

from __future__ import annotations

from collections.abc import Sequence

from rolltap.errors import ConfigError
from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import DONE_STATUSES
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.runner import WorkItem
from rolltap.rollouts.tasks import Task, load_tasks, task_from_dict
from rolltap.store import SessionInfo, Store

__all__ = ["plan_resume"]


def _key(session: SessionInfo) -> tuple[str, int] | None:
    task_id, sample = session.task.get("task_id"), session.task.get("sample")
    if not isinstance(task_id, str) or not isinstance(sample, int):
        return None
    return task_id, sample


def _tasks_from_sessions(sessions: Sequence[SessionInfo]) -> list[Task]:
    seen: dict[str, Task] = {}
    for session in sessions:
        raw = session.task.get("task")
        key = _key(session)
        if key is not None and isinstance(raw, dict) and key[0] not in seen:
            seen[key[0]] = task_from_dict(raw, key[0])
    return list(seen.values())


def _earlier(session: SessionInfo, key: tuple[str, int]) -> RolloutResult:
    return RolloutResult(key[0], key[1], session.id, session.status, reward=session.reward)


async def plan_resume(
    store: Store, run_id: str, config: RunConfig, tasks: Sequence[Task] | None
) -> tuple[list[WorkItem], list[RolloutResult]]:
    """(work to redo, results kept from earlier attempts)."""
    sessions = await store.list_sessions(run=run_id)
    if tasks is None:
        if config.tasks is not None:
            tasks = load_tasks(config.tasks, n=config.n, shuffle=config.shuffle, seed=config.seed)
        else:
            tasks = _tasks_from_sessions(sessions)
    if not tasks:
        raise ConfigError(f"run {run_id}: no tasks to resume")
    done: dict[tuple[str, int], RolloutResult] = {}
    for session in sessions:
        key = _key(session)
        if key is not None and session.status in DONE_STATUSES and key not in done:
            done[key] = _earlier(session, key)
        else:
            await store.delete_session(session.id)
    items = [
        WorkItem(task, sample)
        for task in tasks
        for sample in range(config.r)
        if (task.id, sample) not in done
    ]
    return items, list(done.values())
