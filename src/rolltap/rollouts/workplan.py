"""What ``--resume`` and ``--retry-failed`` run again in a stored run.

A rollout *slot* is one (task id, sample) of the run.

``--resume`` reruns every slot without a ``completed`` or ``limit_reached`` session.
Sessions of those that did not finish are deleted first, so each slot of a run never
retried ends with exactly one session. A slot with attempts (``--retry-failed`` ran it
again) keeps its history: with a done attempt it is left as it is; otherwise only its
latest attempt is deleted and run again in its place (the same attempt number, repeating
the same session), the earlier attempts stay.

``--retry-failed`` runs a new attempt of every slot whose latest attempt failed (any
error code, or one of ``codes``): a new session, ``attempt`` one more than that one,
``retry_of`` its id. Nothing is deleted; every session stays, and the run's summary
counts one attempt per slot by the run's policy (:mod:`rolltap.results.attempts`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from rolltap.errors import ConfigError
from rolltap.results.attempts import by_slot, failure_code, latest
from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import DONE_STATUSES, is_failed
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.runner import WorkItem
from rolltap.rollouts.tasks import Task, load_tasks, task_from_dict
from rolltap.store import SessionInfo, Store

__all__ = ["plan_again", "plan_resume", "plan_retry"]

_Key = tuple[str, int]


def _key(session: SessionInfo) -> _Key | None:
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


class _ResumePlan:
    """Per slot, what a resume keeps (``earlier``), deletes, and reruns as which attempt.
    ``rows``: the run's sessions as results read from their rows (tokens, duration and
    error code included, so the resumed run's summary counts what they used)."""

    def __init__(self, rows: list[RolloutResult]) -> None:
        self._rows = {row.session_id: row for row in rows}
        self.settled: set[_Key] = set()
        self.earlier: list[RolloutResult] = []
        self.doomed: list[str] = []
        #: a retried slot's latest attempt, run again in its place: (attempt, retry_of)
        self.again: dict[_Key, tuple[int, str | None]] = {}

    def plain(self, key: _Key, group: list[SessionInfo]) -> None:
        """A slot never retried: its first done session stays, every other one goes."""
        for session in group:
            if session.status in DONE_STATUSES and key not in self.settled:
                self.settled.add(key)
                self.earlier.append(self._earlier(session, key))
            else:
                self.doomed.append(session.id)

    def retried(self, key: _Key, group: list[SessionInfo]) -> None:
        """A slot with attempts: its history stays but for an unfinished latest attempt."""
        last = max(reversed(group), key=lambda s: s.attempt)
        done = any(s.status in DONE_STATUSES for s in group)
        if done:
            self.settled.add(key)
        else:
            self.doomed.append(last.id)
            self.again[key] = (last.attempt, last.retry_of)
        self.earlier += [self._earlier(s, key) for s in group if done or s is not last]

    def _earlier(self, session: SessionInfo, key: _Key) -> RolloutResult:
        row = self._rows.get(session.id)
        if row is not None:
            return replace(row, task_id=key[0], sample=key[1])
        return RolloutResult(
            key[0], key[1], session.id, session.status, reward=session.reward,
            attempt=session.attempt, retry_of=session.retry_of,
        )  # fmt: skip


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
    plan, slots = _ResumePlan(await store.run_results(run_id)), dict[_Key, list[SessionInfo]]()
    for session in sessions:
        key = _key(session)
        if key is None:
            plan.doomed.append(session.id)
        else:
            slots.setdefault(key, []).append(session)
    for key, group in slots.items():
        if any(s.attempt > 0 for s in group):
            plan.retried(key, group)
        else:
            plan.plain(key, group)
    for session_id in plan.doomed:
        await store.delete_session(session_id)
    items = [
        WorkItem(task, sample, *plan.again.get((task.id, sample), (0, None)))
        for task in tasks
        for sample in range(config.r)
        if (task.id, sample) not in plan.settled
    ]
    return items, plan.earlier


async def plan_retry(
    store: Store, run_id: str, codes: Collection[str] | None
) -> tuple[list[WorkItem], list[RolloutResult]]:
    """(a new attempt of every slot whose latest attempt failed — with one of ``codes``
    when given —, every session of the run as a result read from its row). Each task is
    the one its failed session ran (not re-read from the tasks file)."""
    sessions = {session.id: session for session in await store.list_sessions(run=run_id)}
    results = await store.run_results(run_id)
    items = []
    for attempts in by_slot(results).values():
        last = latest(attempts)
        if not is_failed(last.status) or (codes is not None and failure_code(last) not in codes):
            continue
        session = sessions.get(last.session_id or "")
        raw = session.task.get("task") if session is not None else None
        if session is None or _key(session) is None or not isinstance(raw, dict):
            continue  # not an eval's rollout (a gateway's session): nothing to run again
        task = task_from_dict(raw, last.task_id)
        items.append(WorkItem(task, last.sample, last.attempt + 1, last.session_id))
    return items, results


async def plan_again(
    store: Store, run_id: str, config: RunConfig, tasks: Sequence[Task] | None, *, retry: bool
) -> tuple[list[WorkItem], list[RolloutResult]]:
    """What a resume (or a ``retry``) of ``run_id`` runs, and the results it keeps; the
    caller holds the run's lease. A retry with work is noted in the run's config, with
    its attempt policy and codes (what later reads of its summary go by)."""
    if not retry:
        return await plan_resume(store, run_id, config, tasks)
    items, earlier = await plan_retry(store, run_id, config.retry_codes)
    if items:
        await store.record_retry(
            run_id, policy=config.attempt_policy, codes=config.retry_codes, slots=len(items)
        )
    return items, earlier
