"""``rolltap.tokens.drift``: where a prompt parts from the previous prompt + completion."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rolltap.tokens.drift import WINDOW, Drift, TurnHistory, common_prefix, find_drift

ids = st.lists(st.integers(0, 5), max_size=300)  # few values: long shared runs


def _naive_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(ids, ids)
def test_common_prefix_is_the_first_difference(a: list[int], b: list[int]) -> None:
    assert common_prefix(a, b) == _naive_prefix(a, b)
    assert common_prefix(tuple(a), b) == _naive_prefix(a, b)  # list or tuple alike


@given(ids, ids, st.integers(0, 600))
def test_find_drift_finds_where_a_changed_copy_parts(
    base: list[int], tail: list[int], cut: int
) -> None:
    expected = base
    got = base[: cut % (len(base) + 1)] + tail
    drift = find_drift(expected, got)
    at = _naive_prefix(expected, got)
    if at == len(expected):
        assert drift is None  # got extends expected
        return
    assert drift is not None and drift.at == at
    lo = max(0, at - WINDOW)
    assert drift.expected == tuple(expected[lo : at + WINDOW])
    assert drift.got == tuple(got[lo : at + WINDOW])
    assert drift.reason is None


def test_a_difference_deep_in_a_long_history() -> None:
    expected = list(range(40_000))
    got = [*expected[:31_337], 7, *expected[31_338:], 1, 2]
    drift = find_drift(expected, got)
    assert drift == Drift(
        31_337, (31_333, 31_334, 31_335, 31_336, 31_337, 31_338, 31_339, 31_340),
        (31_333, 31_334, 31_335, 31_336, 7, 31_338, 31_339, 31_340),
    )  # fmt: skip
    assert drift.with_reason("retokenized").to_record() == {
        "at": 31_337, "expected": list(drift.expected), "got": list(drift.got),
        "reason": "retokenized",
    }  # fmt: skip
    # a prompt shorter than the history drifts where it ends
    assert find_drift(expected, expected[:10]) == Drift(10, (6, 7, 8, 9, 10, 11, 12, 13),
                                                        (6, 7, 8, 9))  # fmt: skip


def test_history_checks_the_prompt_against_the_previous_prompt_and_completion() -> None:
    history = TurnHistory()
    assert history.check([1, 2, 3]) is None  # nothing before the first turn
    history.sampled([1, 2, 3], [10, 11])
    assert history.expected == (1, 2, 3, 10, 11)
    assert history.check([1, 2, 3, 10, 11, 4]) is None
    drift = history.check([1, 2, 3, 10, 12, 4])  # the completion itself differs
    assert drift is not None and drift.at == 4
    drift = history.check([1, 2, 3])  # completion missing
    assert drift is not None and (drift.at, drift.got) == (3, (1, 2, 3))


def test_reasoning_spans_follow_the_sequence_and_are_forgotten_past_a_drift() -> None:
    history = TurnHistory()
    history.sampled([1, 2], [50, 51, 52], reasoning=["thought one"])
    history.sampled([1, 2, 50, 51, 52, 3], [60, 61], reasoning=["thought two"])
    assert [(s.start, s.end, s.texts) for s in history.reasoning] == [
        (2, 5, ("thought one",)), (6, 8, ("thought two",)),
    ]  # fmt: skip
    span = history.span_at(3)
    assert span is not None and span.texts == ("thought one",)
    assert history.span_at(5) is None  # the prompt id between the two completions
    # the next prompt parts inside the first completion: both spans are gone
    history.sampled([1, 2, 52, 3], [70])
    assert history.reasoning == []
    # one that parts after the first keeps it
    history = TurnHistory()
    history.sampled([1], [50, 51], reasoning=["kept"])
    history.sampled([1, 50, 51, 2], [60], reasoning=["lost"])
    history.sampled([1, 50, 51, 9], [70])
    assert [s.texts for s in history.reasoning] == [("kept",)]


@given(ids, ids, ids, st.booleans())
def test_history_check_is_find_drift_of_prompt_plus_completion(
    prompt: list[int], completion: list[int], got: list[int], as_lists: bool
) -> None:
    history = TurnHistory()
    if as_lists:  # as a relay parses ids
        history.sampled(prompt, completion)
    else:  # as the token client renders them (a list of ids checked against tuples)
        history.sampled(tuple(prompt), tuple(completion))
    for new in (got, [*prompt, *completion, *got], [*prompt, *got]):
        assert history.check(new) == find_drift([*prompt, *completion], new)
