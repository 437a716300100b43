"""Score a stored run again, with no model call: ``rolltap score`` and :func:`score`.

Each rollout is scored by the rule ``rolltap eval`` scores it by (:mod:`.runner`): only a
rollout whose harness ran to an end (``completed``, ``limit_reached``, ``failed``,
``timeout``; not ``error``, ``cancelled`` or ``stale``) gets a reward; one without an
answer scores 0.0; otherwise the reward functions get its task (as stored with the
session), its answer (its final ``status`` event's) and its events as they stood when
``eval`` scored it (the log before the trailing ``no_model_calls`` note, ``reward`` and
``status`` events: model calls, tool results, the ``check`` a working-directory
harness ran). A reward function that raises makes that rollout ``error`` with
``reward_error``, as in ``eval``; a rollout whose original reward raised is scored again.

The results are a new *scoring* of the run (:meth:`~rolltap.store.Store.create_scoring`):
every session's score, then the summary — the run's, with its rewards, statuses, errors
and pass@k made from the new scores (one attempt per slot by the run's attempt policy)
and what only the model calls say (calls, latencies, versions) kept from the run's own.
The run's own rewards are never changed.

>>> async def main() -> None:  # doctest: +SKIP
...     scored = await score("7ba5", ["exact", "contains=0.5"], name="strict")
...     print(scored.scoring.id, scored.summary["reward"]["mean"])
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rolltap.errors import ConfigError, UsageError
from rolltap.events import Event, EventKind
from rolltap.results.attempts import summarize_run
from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import HARNESS_RAN_STATUSES, NO_MODEL_CALLS, REWARD_ERROR
from rolltap.rollouts.rewards import RewardSpec, Scorer, parse_reward_spec
from rolltap.rollouts.tasks import Task, task_from_dict
from rolltap.store import (
    Score,
    ScoringInfo,
    SessionInfo,
    Store,
    resolve_store_url,
    reward_histogram,
    run_policy,
    run_r,
)

__all__ = ["DEFAULT_SCORE_CONCURRENCY", "RunNotFinishedError", "Scored", "score", "score_stored"]

#: rollouts scored at once (their events are read, then the reward functions run)
DEFAULT_SCORE_CONCURRENCY = 32
#: what a scoring does not change (the model calls, their timing, the rollouts' durations):
#: kept from the run's own summary in a scoring's
_KEPT = ("model_calls", "model_errors", "no_model_calls", "token_drift", "latency_ms",
         "ttfc_ms", "gateway_ms", "policy_versions", "duration_s")  # fmt: skip


class RunNotFinishedError(UsageError):
    """A run with rollouts still running (or pending) was to be scored: its scoring
    would miss them. Score it once it has finished, or after ``rolltap eval --resume``."""

    code = "run_not_finished"
    status = 409


@dataclass(frozen=True, slots=True)
class Scored:
    """A scoring made: its stored row (with ``summary``), every session's result under it
    (status, reward, components, error), and the summary."""

    scoring: ScoringInfo
    results: list[RolloutResult]
    summary: dict[str, Any]


def _specs(rewards: Sequence[str | RewardSpec]) -> list[RewardSpec]:
    return [r if isinstance(r, RewardSpec) else parse_reward_spec(r) for r in rewards]


def _task(session: SessionInfo) -> Task | None:
    """The task the session ran, as stored with it (None: not an eval's rollout)."""
    doc = session.task.get("task")
    if not isinstance(doc, Mapping):
        return None
    try:
        return task_from_dict(doc, str(session.task.get("task_id", session.id)))
    except ValueError:
        return None


def _as_scored(events: Sequence[Event]) -> tuple[list[Event], dict[str, Any]]:
    """The events as ``eval`` handed them to the rewards, and the final status payload."""
    kept = list(events)
    final: dict[str, Any] = {}
    if kept and kept[-1].kind == EventKind.STATUS:
        final = dict(kept.pop().payload)
    if kept and kept[-1].kind == EventKind.REWARD:
        kept.pop()
    if kept and kept[-1].kind == EventKind.NOTE and kept[-1].payload.get("text") == NO_MODEL_CALLS:
        kept.pop()
    return kept, final


def _ran_status(res: RolloutResult, final: Mapping[str, Any]) -> str:
    """How the harness ended: the stored status, or, for a rollout whose reward raised
    (stored ``error``), what it was before (it had an answer: completed or at a limit)."""
    if res.status == "error" and res.error_code == REWARD_ERROR and final.get("answer") is not None:
        return "limit_reached" if final.get("limit") else "completed"
    return res.status


async def _score_one(
    scorer: Scorer, res: RolloutResult, task: Task | None, events: Sequence[Event]
) -> tuple[Score, RolloutResult]:
    sid = res.session_id or ""
    kept, final = _as_scored(events)
    status = _ran_status(res, final)
    if task is None or status not in HARNESS_RAN_STATUSES:
        return Score(sid, None), replace(res, reward=None, components={})
    answer = final.get("answer")
    ran = replace(res, status=status, answer=answer if isinstance(answer, str) else None)
    if status != res.status:
        ran.error_code = ran.error_message = ran.error = None
    if ran.answer is None:
        return Score(sid, 0.0), replace(ran, reward=0.0, components={})
    try:
        reward, parts = await scorer.score(task, ran.answer, kept)
    except Exception as exc:  # noqa: BLE001
        # A crashing reward function is this rollout's reward_error, as in eval.
        message = f"reward: {type(exc).__name__}: {exc}"
        failed = replace(ran, status="error", reward=None, components={}, error=message,
                         error_code=REWARD_ERROR, error_message=message)  # fmt: skip
        return Score(sid, None, {}, REWARD_ERROR, message), failed
    return Score(sid, reward, parts), replace(ran, reward=reward, components=parts)


async def _score_all(
    store: Store, scorer: Scorer, todo: list[tuple[RolloutResult, Task | None]],
    concurrency: int, on_result: Callable[[RolloutResult], None] | None,
) -> tuple[list[Score], list[RolloutResult]]:  # fmt: skip
    """Score every rollout, at most ``concurrency`` at once; in ``todo``'s order."""
    scores: list[Score | None] = [None] * len(todo)
    results: list[RolloutResult | None] = [None] * len(todo)
    queue: Iterator[int] = iter(range(len(todo)))

    async def worker() -> None:
        for i in queue:  # one shared iterator: each index is taken once
            res, task = todo[i]
            events = await store.events(res.session_id or "")
            scores[i], results[i] = await _score_one(scorer, res, task, events)
            if on_result is not None:
                on_result(results[i])  # type: ignore[arg-type]

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(todo)) or 1):
            group.create_task(worker())
    return [s for s in scores if s is not None], [r for r in results if r is not None]


def _summary(
    results: list[RolloutResult], config: Mapping[str, Any], original: Mapping[str, Any]
) -> dict[str, Any]:
    """The scoring's summary: by the new results, the model calls' figures the run's."""
    summary = summarize_run(results, r=run_r(config), policy=run_policy(config), calls_known=False)
    for key in _KEPT:
        if original.get(key) is not None:
            summary[key] = original[key]
    # the charts count every session, as the run's do; the scoring's reward chart its own
    hist = reward_histogram(res.reward for res in results if res.reward is not None)
    summary["histograms"] = {"reward": hist} if hist is not None else {}
    return summary


async def score_stored(
    store: Store, run_id: str, rewards: Sequence[str | RewardSpec], *,
    name: str | None = None, concurrency: int = DEFAULT_SCORE_CONCURRENCY,
    on_plan: Callable[[str, int], None] | None = None,
    on_result: Callable[[RolloutResult], None] | None = None,
) -> Scored:  # fmt: skip
    """:func:`score` on an open store, for run ``run_id`` (its full id)."""
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1 (got {concurrency})")
    specs = _specs(rewards)
    scorer = Scorer(specs)  # unknown rewards fail here, before anything is stored
    run = await store.get_run(run_id)
    results = await store.run_results(run_id)
    running = [res for res in results if res.status in ("pending", "running")]
    if running:
        raise RunNotFinishedError(
            f"run {run_id} has {len(running)} rollout(s) still running: score it once it has "
            f"finished (an interrupted run: rolltap eval --resume {run_id[:8]}, then score)"
        )
    tasks = {s.id: _task(s) for s in await store.list_sessions(run_id)}
    todo = [(res, tasks.get(res.session_id or "")) for res in results]
    if on_plan is not None:
        on_plan(run_id, len(todo))
    scores, scored = await _score_all(store, scorer, todo, concurrency, on_result)
    # stored once every rollout is scored; complete (readable) once its summary lands
    info = await store.create_scoring(
        run_id, [{"name": s.name, "weight": s.weight} for s in specs], name=name
    )
    await store.write_scores(info.id, scores)
    summary = _summary(scored, run.config, await store.run_summary(run_id))
    await store.write_scoring_summary(info.id, summary)
    return Scored(replace(info, summary=summary), scored, summary)


async def score(
    run: str, rewards: Sequence[str | RewardSpec], *, store: str | None = None,
    name: str | None = None, concurrency: int = DEFAULT_SCORE_CONCURRENCY,
    on_plan: Callable[[str, int], None] | None = None,
    on_result: Callable[[RolloutResult], None] | None = None,
) -> Scored:  # fmt: skip
    """Score stored run ``run`` (an id or a unique prefix) again with ``rewards`` (as
    ``rolltap eval --reward``: ``NAME[=WEIGHT]`` or ``module:function``), as a new scoring
    named ``name``, in the store at ``store`` (default: ``ROLLTAP_STORE``, else
    ``sqlite:///rolltap.db``). No model is called. See the module docs."""
    async with await Store.open(resolve_store_url(store), create=False) as opened:
        run_id = await opened.resolve_run_id(run)
        return await score_stored(
            opened, run_id, rewards, name=name, concurrency=concurrency,
            on_plan=on_plan, on_result=on_result,
        )  # fmt: skip
