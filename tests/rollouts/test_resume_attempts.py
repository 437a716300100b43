"""``--resume`` of a run with attempts keeps their history: a slot with a done attempt
stays as it is; in another, only its latest attempt runs again, in its place."""

from __future__ import annotations

from pathlib import Path

from rolltap.events import EventKind, EventLog
from rolltap.rollouts import RunConfig
from rolltap.rollouts.workplan import plan_resume, plan_retry
from rolltap.store import Store


def _task(task_id: str, sample: int) -> dict[str, object]:
    return {"task_id": task_id, "sample": sample, "task": {"id": task_id, "prompt": "p"}}


async def _ended(store: Store, session_id: str, status: str, reward: float | None) -> None:
    log = EventLog()
    log.append(EventKind.STATUS, {"status": status})
    await store.commit(session_id, log, status=status, reward=reward)


async def test_resume_runs_again_only_the_latest_unfinished_attempt(tmp_path: Path) -> None:
    config = RunConfig(r=1)
    async with await Store.open(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        run = await store.create_run("r", {"run": config.model_dump(mode="json")})
        # "done": failed, then retried and completed — nothing to resume
        done0 = await store.create_session(run.id, task=_task("done", 0))
        await _ended(store, done0.id, "failed", 0.0)
        done1 = await store.create_session(
            run.id, task=_task("done", 0), attempt=1, retry_of=done0.id
        )
        await _ended(store, done1.id, "completed", 1.0)
        # "cut": failed, its retry cut short (still running when its owner went away)
        cut0 = await store.create_session(run.id, task=_task("cut", 0))
        await _ended(store, cut0.id, "failed", 0.0)
        cut1 = await store.create_session(run.id, task=_task("cut", 0), attempt=1, retry_of=cut0.id)
        # "plain": never retried, failed: a resume replaces it, as it always did
        plain = await store.create_session(run.id, task=_task("plain", 0))
        await _ended(store, plain.id, "failed", 0.0)

        items, earlier = await plan_resume(store, run.id, config, None)
        kept = {s.id for s in await store.list_sessions(run.id)}
        assert kept == {done0.id, done1.id, cut0.id}  # the history stays
        assert sorted((i.task.id, i.attempt, i.retry_of) for i in items) == [
            ("cut", 1, cut0.id), ("plain", 0, None),
        ]  # fmt: skip
        assert {(r.session_id, r.attempt) for r in earlier} == {
            (done0.id, 0), (done1.id, 1), (cut0.id, 0),
        }  # fmt: skip
        assert cut1.id not in kept

        # a retry of the same run then would repeat cut0 (the latest attempt left): the
        # same link the resume restores
        retry, _ = await plan_retry(store, run.id, None)
        assert [(i.task.id, i.attempt, i.retry_of) for i in retry] == [("cut", 1, cut0.id)]
