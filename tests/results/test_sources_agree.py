"""A run's summary is the same from its results in memory and from the store's aggregates.

Random runs of rollouts (tasks, statuses, model calls and errors, named failures, rewards)
are summarized as ``rolltap eval`` does, from the :class:`RolloutResult` s, and written
through the real store API to a real SQLite database, whose SQL summary must match: the
same statuses, tokens, error codes with their first messages, rewards and pass@k.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rolltap.events import EventKind, EventLog
from rolltap.results.failure import last_model_error
from rolltap.results.rollout import RolloutResult, call_stats
from rolltap.results.summary import summarize
from rolltap.store import Store

_STATUSES = ("completed", "limit_reached", "failed", "timeout", "error", "cancelled", "stale")
#: a stale rollout (the staleness bound refused its call) is not scored, nor a failure
_UNREWARDED = ("error", "cancelled", "stale")


@dataclass(frozen=True)
class Call:
    """A model call: answered with token counts, or failed with a code and message."""

    answered: bool
    prompt: int = 0
    completion: int = 0
    code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Plan:
    """One rollout as it ended."""

    task: str
    status: str
    calls: tuple[Call, ...]
    error: str | None
    named: tuple[str, str] | None
    reward: float | None


_answered = st.builds(Call, st.just(True), st.integers(0, 500), st.integers(0, 200))
_failed = st.builds(
    Call,
    st.just(False),
    code=st.sampled_from([None, "", "upstream_timeout", "upstream_http_error"]),
    message=st.sampled_from([None, "", "slow", "500 from upstream"]),
)
_calls = st.one_of(_answered, _failed)
_rewards = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False)
)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    status = draw(st.sampled_from(_STATUSES))
    named = None
    if status == "error":  # a registration or reward error its owner named
        named = draw(st.sampled_from([None, ("reward_error", "reward: boom"), ("bad", "")]))
    return Plan(
        task=draw(st.sampled_from("abc")), status=status,
        calls=tuple(draw(st.lists(_calls, max_size=4))),
        error=draw(st.sampled_from([None, "", "RuntimeError: harness bug", "stopped"])),
        named=named, reward=None if status in _UNREWARDED else draw(_rewards),
    )  # fmt: skip


def _log_of(plan: Plan) -> EventLog:
    log = EventLog()
    for call in plan.calls:
        if call.answered:
            usage = {"prompt_tokens": call.prompt, "completion_tokens": call.completion}
            log.append(EventKind.MODEL_RESPONSE, {"intercept_id": "i", "usage": usage})
        else:
            log.append(EventKind.MODEL_ERROR, {"code": call.code, "message": call.message})
    return log


def _result_of(plan: Plan, sample: int, session_id: str, log: EventLog) -> RolloutResult:
    """The result as the runner makes it (its failure named by the one rule)."""
    result = RolloutResult(
        plan.task, sample, session_id, plan.status, reward=plan.reward, error=plan.error
    )
    if plan.named is not None:
        result.error_code, result.error_message = plan.named
    result.name_failure(last_model_error(log))
    result.calls = call_stats(log)
    return result


async def _run(plans_: list[Plan], r: int, folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    results = []
    async with await Store.open(f"sqlite:///{folder / 'runs.db'}") as store:
        run = await store.create_run("prop", {"run": {"r": r}})
        for i, plan in enumerate(plans_):
            task = {"task_id": plan.task, "sample": i}
            session = await store.create_session(run.id, task=task)
            log = _log_of(plan)
            result = _result_of(plan, i, session.id, log)
            results.append(result)
            if result.reward is not None:  # the runner's final events
                log.append(EventKind.REWARD, {"reward": result.reward})
            log.append(EventKind.STATUS, result.status_payload())
            await store.commit(session.id, log, status=result.status, reward=result.reward)
        stored = await store.run_summary(run.id)
    return summarize(results, r=r), stored


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _assert_same(memory: dict[str, Any], sql: dict[str, Any]) -> None:
    assert sql["stored"] is False
    for key in ("rollouts", "statuses", "tokens", "errors"):
        assert sql[key] == memory[key], key
    mine, theirs = memory["reward"], sql["reward"]
    assert theirs["n"] == mine["n"] and _close(theirs["mean"], mine["mean"])
    if mine["ci95"] is None:
        assert theirs["ci95"] is None
    else:
        assert all(_close(x, y) for x, y in zip(mine["ci95"], theirs["ci95"], strict=True))
    assert memory.get("pass_at_k", {}).keys() == sql.get("pass_at_k", {}).keys()
    for k, value in memory.get("pass_at_k", {}).items():
        assert _close(sql["pass_at_k"][k], value), k


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
@given(plans_=st.lists(plans(), max_size=12), r=st.sampled_from([1, 2, 4]))
def test_memory_and_sql_summaries_agree(plans_: list[Plan], r: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        memory, sql = asyncio.run(_run(plans_, r, Path(folder)))
    _assert_same(memory, sql)
