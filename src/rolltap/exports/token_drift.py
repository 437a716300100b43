"""Token drift in the training export: which turns drifted, and ``--on-drift keep``.

A turn has drifted when its prompt does not start with the previous turn's prompt +
completion: its record says so (``tokens.drift``, written by the token client or a relay
with server-side token capture, docs/events.md "Token drift"), or its ids show it (a
record from before drift was recorded). The export then, by ``on_drift``:

* ``split`` (the default): segments, as format v1 always made them (a new one at each
  ``full`` render or broken ``extend`` claim);
* ``keep``: one sequence per rollout, the drifted prompt's ids as sent: the sequence is
  cut where the prompt parts from it and continued with the prompt, so it ends as the
  last prompt + completion, the model's samples before each cut still masked in; each
  drifted turn and ``metadata.drift`` say where;
* ``drop``: the rollout is left out, and counted.
"""

from __future__ import annotations

from typing import Any, Literal

from rolltap.exports.token_records import Segment, TokenTurn

__all__ = ["ON_DRIFT", "OnDrift", "assemble_kept", "drift_of", "drifts"]

OnDrift = Literal["split", "keep", "drop"]
ON_DRIFT: tuple[OnDrift, ...] = ("split", "keep", "drop")
#: ids shown on each side of a drift the ids revealed (the token client's window)
_WINDOW = 4


def _common_prefix(a: list[int], b: list[int]) -> int:
    if b[: len(a)] == a:
        return len(a)
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


def drift_of(previous: TokenTurn | None, turn: TokenTurn) -> dict[str, Any] | None:
    """``turn``'s drift from ``previous``: the recorded one, else one its ids show."""
    if turn.drift is not None:
        return turn.drift
    if previous is None:
        return None
    expected = previous.prompt_ids + previous.completion_ids
    at = _common_prefix(expected, turn.prompt_ids)
    if at == len(expected):
        return None
    lo = max(0, at - _WINDOW)
    return {
        "at": at, "expected": expected[lo : at + _WINDOW],
        "got": turn.prompt_ids[lo : at + _WINDOW], "reason": None,
    }  # fmt: skip


def drifts(turns: list[TokenTurn]) -> list[dict[str, Any] | None]:
    """Each turn's drift (``None`` where it extends the turn before)."""
    return [drift_of(turns[n - 1] if n else None, turn) for n, turn in enumerate(turns)]


def assemble_kept(turns: list[TokenTurn]) -> Segment:
    """The one sequence of ``keep``: cut at each prompt's first difference, continued
    with it; so ``tokens`` end as the last prompt + completion, exactly as sent."""
    sequence = Segment()
    for turn in turns:
        sequence.cut(_common_prefix(sequence.tokens, turn.prompt_ids))
        sequence.add(turn)
    return sequence
