"""One attempt per rollout slot: the ``best`` and ``last`` policies, the attempts count,
the summary of a retried run, and the error codes a retry may name."""

from __future__ import annotations

import pytest

from rolltap.results.attempts import (
    attempt_summary,
    attempts_of,
    check_codes,
    failure_code,
    known_failure_codes,
    pick,
    summarize_run,
)
from rolltap.results.rollout import CallStats, RolloutResult
from rolltap.results.summary import summarize


def _res(
    session: str, status: str, reward: float | None, *, attempt: int = 0, task: str = "t",
    sample: int = 0, code: str | None = None,
) -> RolloutResult:  # fmt: skip
    retry_of = f"{task}{sample}-{attempt - 1}" if attempt else None
    return RolloutResult(task, sample, session, status, reward=reward, error_code=code,
                         attempt=attempt, retry_of=retry_of)  # fmt: skip


def _ids(results: list[RolloutResult]) -> list[str | None]:
    return [res.session_id for res in results]


def test_best_and_last_differ_when_the_retry_did_worse() -> None:
    # attempt 0 ended failed (scored 0.0); its retry's reward function crashed (no reward)
    run = [
        _res("a0", "failed", 0.0, code="upstream_http_error"),
        _res("a1", "error", None, attempt=1, code="reward_error"),
        _res("b0", "completed", 1.0, task="u"),
    ]
    assert _ids(pick(run, "best")) == ["a0", "b0"]
    assert _ids(pick(run, "last")) == ["a1", "b0"]
    best = attempt_summary(run, r=1, policy="best")
    last = attempt_summary(run, r=1, policy="last")
    assert (best["rollouts"], best["statuses"]) == (2, {"completed": 1, "failed": 1})
    assert (last["rollouts"], last["statuses"]) == (2, {"completed": 1, "error": 1})
    assert (best["reward"]["mean"], best["reward"]["n"]) == (0.5, 2)
    assert (last["reward"]["mean"], last["reward"]["n"]) == (1.0, 1)
    assert list(best["errors"]) == ["upstream_http_error"] and list(last["errors"]) == [
        "reward_error"
    ]
    counts = {"sessions": 3, "slots": 2, "retried": 1, "max_attempt": 1}
    assert best["attempts"] == {"policy": "best", **counts}
    assert last["attempts"] == {"policy": "last", **counts}


def test_best_ranks_reward_then_done_then_the_later_attempt() -> None:
    done_zero, failed_zero = _res("x0", "completed", 0.0), _res("x1", "failed", 0.0, attempt=1)
    assert _ids(pick([done_zero, failed_zero], "best")) == ["x0"]  # done over failed, later
    cancelled = _res("c0", "cancelled", 0.0)
    assert _ids(pick([cancelled, failed_zero], "best")) == ["c0"]  # failed lowest
    rewarded = _res("x2", "failed", 0.0, attempt=2)
    unrewarded = _res("x3", "error", None, attempt=3)
    assert _ids(pick([rewarded, unrewarded], "best")) == ["x2"]  # no reward is lowest
    again = _res("x4", "failed", 0.0, attempt=4)
    assert _ids(pick([again, rewarded], "best")) == ["x4"]  # a tie: the later attempt
    higher = _res("x5", "completed", 0.7, attempt=5)
    assert _ids(pick([higher, _res("x6", "completed", 0.2, attempt=6)], "best")) == ["x5"]
    assert _ids(pick([higher, _res("x6", "completed", 0.2, attempt=6)], "last")) == ["x6"]


def test_slots_are_task_and_sample() -> None:
    run = [_res("s0", "failed", 0.0, sample=0), _res("s1", "completed", 1.0, sample=1),
           _res("s0b", "completed", 1.0, sample=0, attempt=1)]  # fmt: skip
    assert _ids(pick(run, "last")) == ["s0b", "s1"]
    assert attempts_of(run) == {"sessions": 3, "slots": 2, "retried": 1, "max_attempt": 1}


def test_a_run_never_retried_is_summarized_as_before() -> None:
    run = [_res("a", "completed", 1.0), _res("b", "failed", 0.0, task="u")]
    assert summarize_run(run, r=1, policy="last") == summarize(run, r=1)
    assert "attempts" not in summarize_run(run, r=1, policy="best")


def test_results_read_back_from_a_store_leave_per_call_figures_unknown() -> None:
    fresh = _res("a1", "completed", 1.0, attempt=1)
    fresh.calls = CallStats(calls=2, latencies_ms=[5.0])
    fresh.duration_s = 3.0
    known = attempt_summary([_res("a0", "failed", 0.0), fresh], r=1, policy="best")
    assert (known["model_calls"], known["latency_ms"]["p50"]) == (2, 5.0)
    assert known["duration_s"] == {"mean": 3.0}
    unknown = attempt_summary([fresh], r=1, policy="best", calls_known=False)
    assert (unknown["model_calls"], unknown["latency_ms"]["p50"]) == (None, None)


def test_an_interrupted_rollout_is_retried_by_its_status() -> None:
    assert failure_code(_res("i", "interrupted", None)) == "interrupted"
    assert failure_code(_res("f", "failed", 0.0, code="upstream_timeout")) == "upstream_timeout"
    assert {"interrupted", "upstream_timeout", "harness_error"} <= set(known_failure_codes())


def test_retry_codes_are_known_codes() -> None:
    assert check_codes(["upstream_timeout,upstream_http_error", " upstream_timeout "]) == [
        "upstream_timeout", "upstream_http_error",
    ]  # fmt: skip
    assert check_codes(["all"]) is None
    with pytest.raises(ValueError, match="did you mean upstream_http_error") as caught:
        check_codes(["upstream_status"])
    assert "known codes: " in str(caught.value) and "worker_lost" in str(caught.value)
    with pytest.raises(ValueError, match="at least one"):
        check_codes([" , "])
