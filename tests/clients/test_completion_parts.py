"""A continued completion's parts made one: ids, logprobs, text and usage merged, and the
policy version of each part as spans over the completion ids."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from rolltap.clients.completion_parts import merge, read_part, version_spans
from rolltap.clients.completions import Completion
from rolltap.dialects.canonical import Usage


def _part(
    ids: list[int], logprobs: list[float] | None, text: str | None = "", *,
    aborted: bool = True, version: str | None = None,
) -> Completion:  # fmt: skip
    return Completion(
        "c", "m", text, tuple(ids), None if logprobs is None else tuple(logprobs),
        None if aborted else "end_turn", Usage(3 + len(ids), len(ids)), aborted=aborted,
        weight_version=version,
    )  # fmt: skip


def test_parts_merge_into_one_answer() -> None:
    parts = [
        _part([1, 2], [-0.1, -0.2], "ab", version="v1"),
        _part([], [], ""),  # cut at once by the engine: adds nothing
        _part([3], [-0.3], "c", aborted=False, version="v2"),
    ]
    whole = merge(parts, prompt_len=3, stop="end_turn")
    assert whole.ids == (1, 2, 3) and whole.logprobs == (-0.1, -0.2, -0.3)
    assert (whole.text, whole.stop_reason, whole.aborted) == ("abc", "end_turn", False)
    assert whole.usage == Usage(3, 3)  # the original prompt, every sampled id
    assert whole.weight_version == "v2"


def test_a_part_without_logprobs_keeps_one_none_per_id() -> None:
    whole = merge([_part([1, 2], None), _part([3], [-0.3], None)], prompt_len=1, stop=None)
    assert whole.logprobs == (None, None, -0.3) and whole.text is None
    assert merge([_part([1], None), _part([2], None)], prompt_len=1, stop=None).logprobs is None


def test_spans_merge_adjacent_parts_of_one_version_and_skip_empty_parts() -> None:
    assert version_spans([]) == []
    assert version_spans([(None, 4)]) == [{"version": None, "start": 0, "end": 4}]
    assert version_spans([("a", 2), ("b", 0), ("a", 3), ("b", 1)]) == [
        {"version": "a", "start": 0, "end": 5},
        {"version": "b", "start": 5, "end": 6},
    ]


@given(st.lists(st.tuples(st.sampled_from([None, "a", "b"]), st.integers(0, 5)), max_size=8))
def test_spans_cover_every_id_once(parts: list[tuple[str | None, int]]) -> None:
    spans = version_spans(parts)
    covered = [i for s in spans for i in range(s["start"], s["end"])]
    assert covered == list(range(sum(n for _, n in parts)))
    assert all(s["end"] > s["start"] for s in spans)
    assert all(a["version"] != b["version"] for a, b in itertools.pairwise(spans))
    per_id = [v for v, n in parts for _ in range(n)]
    assert [s["version"] for s in spans for _ in range(s["start"], s["end"])] == per_id


def test_a_part_is_read_with_the_engines_version() -> None:
    raw = (
        b'{"output_ids": [4], "meta_info": {"prompt_tokens": 2, "completion_tokens": 1,'
        b' "weight_version": "w7", "finish_reason": {"type": "abort"}}}'
    )
    body, done = read_part("sglang", raw, 2)
    assert body["output_ids"] == [4] and done.ids == (4,)
    assert done.aborted and done.weight_version == "w7"
