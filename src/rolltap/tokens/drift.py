"""Token drift: a turn whose prompt ids do not extend the previous turn's prompt + completion.

A trainer's sequence for a rollout is the last prompt + completion; it is exactly what
was sampled only while each prompt starts with the previous prompt + the ids sampled
from it. When it does not (the harness rewrote history, the chat template dropped
earlier reasoning, the same text was tokenized to other ids), the turn has *drifted*:
:func:`find_drift` says where, :class:`TurnHistory` keeps one rollout's previous turn to
check the next against, and any code path with ids (the token client, a relay with
server-side token capture) records ``Drift.to_record()`` as ``tokens.drift`` in the
call's events (docs/events.md, "Token drift").

The comparison is C-speed: slices (of tuples or lists, as the path holds its ids)
compared for equality, the first difference found by bisection over slices, never a
Python loop over the ids (a few dozen at most).

>>> find_drift((1, 2, 3, 4), (1, 2, 9, 4, 5)).at
2
>>> find_drift((1, 2), (1, 2, 3)) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "DRIFT_REASONS",
    "WINDOW",
    "Drift",
    "DriftReason",
    "Ids",
    "ReasoningSpan",
    "TurnHistory",
    "common_prefix",
    "find_drift",
]

DriftReason = Literal["history_rewritten", "reasoning_dropped", "retokenized"]
"""Why a prompt drifted, when known:

* ``history_rewritten``: the harness changed earlier messages (edited, dropped, reordered);
* ``reasoning_dropped``: the template dropped earlier reasoning: sampled reasoning ids of
  the expected sequence are missing from the new prompt;
* ``retokenized``: the same text, tokenized to different ids."""
DRIFT_REASONS: tuple[DriftReason, ...] = ("history_rewritten", "reasoning_dropped", "retokenized")

#: ids recorded on each side of the first differing position
WINDOW = 4
#: below this many ids the bisection stops and compares one by one
_LINEAR = 32


Ids = tuple[int, ...] | list[int]
"""Ids as a path holds them: a tuple (a rendered prompt) or a list (parsed JSON); kept
as given, never copied to compare."""


def _like(ids: Sequence[int], model: Ids) -> Ids:
    """``ids`` as ``model``'s type: a list never equals a tuple (the copy is one C pass)."""
    if type(ids) is type(model):
        return ids
    return list(ids) if isinstance(model, list) else tuple(ids)


def _first_difference(a: Ids, b: Ids, hi: int) -> int:
    """The first position below ``hi`` where ``a`` and ``b`` (same type) differ, else
    ``hi``. Bisected on slice compares: O(hi) in C, ~log2(hi) steps in Python."""
    lo = 0  # a[:lo] == b[:lo]; a difference, if any, lies before hi
    while hi - lo > _LINEAR:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while lo < hi and a[lo] == b[lo]:
        lo += 1
    return lo


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids ``a`` and ``b`` share (C-speed slice compares, bisected)."""
    a = a if isinstance(a, tuple | list) else tuple(a)
    b = _like(b, a)
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    return _first_difference(a, b, n)


@dataclass(frozen=True, slots=True)
class Drift:
    """Where a prompt parts from the sequence it should extend.

    ``at`` is the first differing position (the length of the common prefix);
    ``expected`` and ``got`` are the ids at ``at - WINDOW`` … ``at + WINDOW`` of the
    expected sequence and of the new prompt (shorter at either end)."""

    at: int
    expected: tuple[int, ...]
    got: tuple[int, ...]
    reason: DriftReason | None = None

    def with_reason(self, reason: DriftReason | None) -> Drift:
        """The same drift, its reason set."""
        return replace(self, reason=reason)

    def to_record(self) -> dict[str, Any]:
        """The event's ``tokens.drift`` object."""
        return {
            "at": self.at, "expected": list(self.expected), "got": list(self.got),
            "reason": self.reason,
        }  # fmt: skip


def find_drift(
    expected: Sequence[int], got: Sequence[int], *, window: int = WINDOW
) -> Drift | None:
    """``None`` when ``got`` starts with ``expected``; else where they part.

    >>> find_drift([5, 6, 7], [5, 6]).at  # a prompt shorter than the history drifts too
    2
    """
    expected = expected if isinstance(expected, tuple | list) else tuple(expected)
    got = _like(got, expected)
    if got[: len(expected)] == expected:
        return None
    at = _first_difference(expected, got, min(len(expected), len(got)))
    lo = max(0, at - window)
    return Drift(at, tuple(expected[lo : at + window]), tuple(got[lo : at + window]))


@dataclass(frozen=True, slots=True)
class ReasoningSpan:
    """Sampled ids at ``start`` … ``end`` of the expected sequence that carried
    ``texts`` as reasoning (what the reasoning parser read from them: one block, or
    several, as Harmony's analysis messages)."""

    start: int
    end: int
    texts: tuple[str, ...]

    def missing_from(self, text: str) -> bool:
        """Whether some of this reasoning is not in ``text`` (a prompt's, from ``start``)."""
        return any(t not in text for t in self.texts)


@dataclass(slots=True)
class TurnHistory:
    """One rollout's previous turn: its prompt + completion ids, what the next prompt
    must start with, and where sampled reasoning lies in them.

    >>> history = TurnHistory()
    >>> history.check((1, 2)) is None  # the first turn extends nothing
    True
    >>> history.sampled((1, 2), (3,))
    >>> history.check((1, 2, 3, 4)) is None, history.check((1, 9)).at
    (True, 1)
    """

    prompt: Ids | None = None
    completion: Ids = ()
    #: sampled reasoning still in the prefix the next prompt should extend
    reasoning: list[ReasoningSpan] = field(default_factory=list)

    @property
    def expected(self) -> tuple[int, ...]:
        """The previous prompt + completion (built on demand: only a drift needs it)."""
        return () if self.prompt is None else (*self.prompt, *self.completion)

    def check(self, got: Sequence[int]) -> Drift | None:
        """The drift of prompt ``got`` from the previous turn, ``None`` when it extends
        (or there was none). Its ``reason`` is the caller's to find (:meth:`span_at`
        helps tell dropped reasoning). One compare of the history, no copy of it but the
        slice of ``got`` compared: O(history) in C, as any check of ids must be."""
        prompt = self.prompt
        if prompt is None:
            return None
        got = _like(got, prompt)
        n, completion = len(prompt), _like(self.completion, prompt)
        if got[:n] != prompt:
            at = _first_difference(prompt, got, min(n, len(got)))
        elif got[n : n + len(completion)] != completion:
            at = n + _first_difference(completion, got[n:], min(len(completion), len(got) - n))
        else:
            return None
        lo, hi = max(0, at - WINDOW), at + WINDOW
        expected = (*prompt[lo:hi], *completion[max(0, lo - n) : max(0, hi - n)])
        return Drift(at, expected, tuple(got[lo:hi]))

    def snapshot(self) -> TurnHistory:
        """This state as it is now (no ids copied), for a check that awaits while the
        rollout's other calls may record theirs."""
        return TurnHistory(self.prompt, self.completion, list(self.reasoning))

    def span_at(self, at: int) -> ReasoningSpan | None:
        """The sampled completion holding position ``at``, if it carried reasoning."""
        return next((s for s in self.reasoning if s.start <= at < s.end), None)

    def sampled(
        self, prompt: Sequence[int], completion: Sequence[int], *,
        reasoning: Sequence[str] = (),
    ) -> None:  # fmt: skip
        """Remember the turn sampled from ``prompt``: ``completion``, and the reasoning
        texts the parser read from it (if any). Lists and tuples are kept as given, not
        copied: the caller must not change them after. Spans past where ``prompt`` parts
        from the previous expected sequence are forgotten (they are no longer in it)."""
        drift = self.check(prompt) if self.reasoning else None
        if drift is not None:
            self.reasoning = [s for s in self.reasoning if s.end <= drift.at]
        self.prompt = prompt if isinstance(prompt, tuple | list) else tuple(prompt)
        self.completion = completion if isinstance(completion, tuple | list) else tuple(completion)
        texts = tuple(t for t in reasoning if t)
        if texts:
            start = len(prompt)
            self.reasoning.append(ReasoningSpan(start, start + len(self.completion), texts))
