"""The relay's drift reasons from ids and messages alone (no tokenizer): which ids a new
server prompt skipped, and whether the harness sent the reasoning back."""

from __future__ import annotations

from typing import Any

import pytest

from rolltap.clients.relay_drift import RelayTurns

PROMPT = list(range(100, 110))
THOUGHT = list(range(200, 210))  # the reasoning's ids, first among the sampled
ANSWER = list(range(300, 316))
MESSAGES: list[Any] = [{"role": "user", "content": "q"}]


def _second_turn(got: list[int], *, sent_back: bool, prefix: int = 1) -> dict[str, Any]:
    """Turn 1 sampled THOUGHT + ANSWER (reasoning "deep thought"); turn 2's server prompt
    is ``got``: its ``tokens`` record as checked."""
    turns = RelayTurns()
    first = {"tokens": {"prompt_ids": PROMPT, "completion_ids": THOUGHT + ANSWER},
             "reasoning": "deep \"thought\""}  # fmt: skip
    turns.begin().settle(first, prefix=0, conversation=MESSAGES)
    assert "drift" not in first["tokens"]
    answer: dict[str, Any] = {"role": "assistant", "content": "a"}
    if sent_back:
        answer["reasoning_content"] = 'deep "thought"'
    conversation = [*MESSAGES, answer, {"role": "user", "content": "more"}]
    second = {"tokens": {"prompt_ids": got, "completion_ids": [1]}}
    turns.begin().settle(second, prefix=prefix, conversation=conversation)
    tokens: dict[str, Any] = second["tokens"]
    return tokens


@pytest.mark.parametrize(
    ("got", "sent_back", "reason"),
    [
        (PROMPT + ANSWER + [7], False, "reasoning_dropped"),  # left out by the harness
        (PROMPT + ANSWER + [7], True, "reasoning_dropped"),  # sent back, not rendered
        (PROMPT + THOUGHT[:7] + ANSWER + [7], True, "retokenized"),  # 3 ids fewer: merges
        (PROMPT + THOUGHT[:6] + ANSWER + [7], True, "reasoning_dropped"),  # 4 fewer
        (PROMPT + THOUGHT + [9] + ANSWER[1:] + [7], True, "retokenized"),  # same length
        (PROMPT + [9] * 20, True, "retokenized"),  # the answer's end nowhere
    ],
)
def test_the_reason_of_a_drift_inside_a_thinking_completion(
    got: list[int], sent_back: bool, reason: str
) -> None:
    tokens = _second_turn(got, sent_back=sent_back)
    assert tokens["drift"]["reason"] == reason
    assert tokens["drift"]["at"] == next(
        i for i, (a, b) in enumerate(zip(PROMPT + THOUGHT + ANSWER, got, strict=False)) if a != b
    )


def test_a_conversation_that_does_not_extend_is_rewritten_history() -> None:
    tokens = _second_turn([100, 9], sent_back=True, prefix=0)
    assert tokens["drift"] == {"at": 1, "expected": [100, 101, 102, 103, 104],
                               "got": [100, 9], "reason": "history_rewritten"}  # fmt: skip


def test_a_prompt_that_extends_has_no_drift() -> None:
    assert "drift" not in _second_turn(PROMPT + THOUGHT + ANSWER + [7], sent_back=False)


def test_a_server_that_sent_no_ids_leaves_the_history_as_it_was() -> None:
    turns = RelayTurns()
    turns.begin().settle({"capture_problems": ["no ids"]}, prefix=0, conversation=MESSAGES)
    assert turns.history.prompt is None and turns.messages == 0
