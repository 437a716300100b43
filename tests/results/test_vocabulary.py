"""The results vocabulary, the failure rule and the arithmetic: doctests and edge cases."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from rolltap.events import Event
from rolltap.results import confidence, failure, passk, rollups, statuses, summary
from rolltap.results.failure import FailureTrace, failure_of, last_model_error
from rolltap.results.passk import pass_at_k
from rolltap.results.rollout import RolloutResult


@pytest.mark.parametrize("module", [confidence, failure, passk, rollups, statuses, summary])
def test_the_doctests_hold(module: ModuleType) -> None:
    assert doctest.testmod(module).failed == 0


def test_pass_at_k_matches_the_definition() -> None:
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - (3 * 2) / (5 * 4))


def test_the_owners_code_comes_first_then_the_last_model_error_then_the_harness() -> None:
    events = [
        Event(0, "model_error", 1.0, {"code": "upstream_timeout", "message": "slow"}),
        Event(1, "model_error", 2.0, {"message": "no code"}),
    ]
    last = last_model_error(events)
    assert last == ("model_error", "no code")
    assert failure_of("failed", named=("reward_error", None), model_error=last, error="e") == (
        "reward_error", "e",
    )  # fmt: skip
    assert failure_of("timeout", model_error=("upstream_timeout", None)) == (
        "upstream_timeout", "timeout",
    )  # fmt: skip
    assert failure_of("error") == ("harness_error", "error")
    assert failure_of("cancelled", named=("x", "y")) is None


def test_a_stored_history_and_the_runner_name_the_same_failure() -> None:
    history = [
        Event(0, "model_error", 1.0, {"code": "upstream_http_error", "message": "500"}),
        Event(1, "status", 2.0, {"status": "failed", "error": "RuntimeError: x"}),
    ]
    trace = FailureTrace()
    for event in history:
        trace.see(event)
    result = RolloutResult("t", 0, "s", "failed", error="RuntimeError: x")
    result.name_failure(last_model_error(history))
    assert trace.failure("failed") == (result.error_code, result.error_message)
    assert trace.failure("failed") == ("upstream_http_error", "500")


def test_a_named_failure_is_kept_and_written_in_the_status_event() -> None:
    result = RolloutResult("t", 0, "s", "error", error="reward: boom")
    result.error_code, result.error_message = "reward_error", "reward: ValueError: boom"
    result.name_failure(("upstream_timeout", "slow"))
    assert (result.error_code, result.error_message) == ("reward_error", "reward: ValueError: boom")
    payload = result.status_payload("turns")
    assert payload == {
        "status": "error", "error": "reward: boom", "limit": "turns", "answer": None,
        "error_code": "reward_error", "error_message": "reward: ValueError: boom",
    }  # fmt: skip
    trace = FailureTrace()
    trace.see(Event(0, "status", 1.0, payload))
    assert trace.failure("error") == ("reward_error", "reward: ValueError: boom")
