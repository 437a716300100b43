"""Attempts of a rollout: which one a run's summary counts, and the codes a retry may name.

A rollout *slot* is one (task id, sample) of a run. ``rolltap eval --retry-failed RUN``
runs a slot whose latest attempt failed again, as a new session of the same run: its
``attempt`` one more than the session it repeats (``retry_of``). A run with attempts is
summarized over one result per slot, picked by the run's *attempt policy*:

- ``best``: the highest reward (no reward lowest), then a done rollout over another,
  over a failed one; on a tie, the later attempt;
- ``last``: the latest attempt, whatever it scored.

>>> from rolltap.results.rollout import RolloutResult as R
>>> first = R("t", 0, "s0", "failed", reward=0.0)
>>> again = R("t", 0, "s1", "error", attempt=1, retry_of="s0")
>>> [r.session_id for r in pick([first, again], "best")], pick([first, again], "last")[0].status
(['s0'], 'error')
>>> attempts_of([first, again])
{'sessions': 2, 'slots': 1, 'retried': 1, 'max_attempt': 1}
"""

from __future__ import annotations

import difflib
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from rolltap.errors import RolltapError
from rolltap.results.confidence import percentiles
from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import (
    DONE_STATUSES,
    FAILED_STATUSES,
    HARNESS_ERROR,
    INTERRUPTED,
    MODEL_ERROR,
    REWARD_ERROR,
)
from rolltap.results.summary import RunSummary, summarize

__all__ = [
    "ATTEMPT_POLICIES",
    "AttemptPolicy",
    "Slot",
    "attempt_summary",
    "attempts_of",
    "by_slot",
    "check_codes",
    "failure_code",
    "known_failure_codes",
    "latest",
    "pick",
    "summarize_run",
]

AttemptPolicy = Literal["best", "last"]
#: the attempt policies, the default first
ATTEMPT_POLICIES: tuple[AttemptPolicy, ...] = ("best", "last")
#: (task id, sample); a result without a task id is a slot of its own (its session id)
Slot = tuple[str, int]


def _slot(result: RolloutResult) -> Slot:
    return result.task_id, result.sample


def by_slot(results: Iterable[RolloutResult]) -> dict[Slot, list[RolloutResult]]:
    """Each slot's attempts, in the order given (a run's sessions: creation order)."""
    out: dict[Slot, list[RolloutResult]] = {}
    for result in results:
        out.setdefault(_slot(result), []).append(result)
    return out


def latest(attempts: Sequence[RolloutResult]) -> RolloutResult:
    """The highest attempt of one slot (of equal ones, the last given)."""
    return max(reversed(attempts), key=lambda res: res.attempt)


def _standing(status: str) -> int:
    """Done over anything else over failed."""
    return 2 if status in DONE_STATUSES else 0 if status in FAILED_STATUSES else 1


def _rank(result: RolloutResult) -> tuple[bool, float, int, int]:
    reward = result.reward
    return reward is not None, reward or 0.0, _standing(result.status), result.attempt


def pick(results: Iterable[RolloutResult], policy: AttemptPolicy) -> list[RolloutResult]:
    """One result per slot by ``policy`` (see the module docs), slots in first-seen order."""
    chosen = []
    for attempts in by_slot(results).values():
        if policy == "last":
            chosen.append(latest(attempts))
        else:  # the rank ends with the attempt: of equal ones, the later wins
            chosen.append(max(attempts, key=_rank))
    return chosen


def attempts_of(results: Iterable[RolloutResult]) -> dict[str, int]:
    """``{"sessions", "slots", "retried", "max_attempt"}``: every attempt, the slots, the
    slots run more than once, and the highest attempt number."""
    slots = by_slot(results)
    every = [res for attempts in slots.values() for res in attempts]
    return {
        "sessions": len(every),
        "slots": len(slots),
        "retried": sum(1 for attempts in slots.values() if latest(attempts).attempt > 0),
        "max_attempt": max((res.attempt for res in every), default=0),
    }


def attempt_summary(
    results: Sequence[RolloutResult], *, r: int, policy: AttemptPolicy, calls_known: bool = True
) -> dict[str, Any]:
    """The summary (:class:`RunSummary`'s JSON form) of one result per slot by ``policy``,
    with ``attempts`` (:func:`attempts_of` and the policy) and the mean ``duration_s``.

    ``calls_known``: whether every result carries its model calls (False for results
    read back from a store's columns: then what only events say is ``None``, as in a
    summary from aggregates)."""
    chosen = pick(results, policy)
    summary = RunSummary.of_results(chosen, r=r)
    if not calls_known:
        summary.model_calls = summary.model_errors = summary.no_model_calls = None
        summary.token_drift, summary.policy_versions = None, None
        summary.latency_ms, summary.ttfc_ms = percentiles(()), percentiles(())
        summary.gateway_ms = percentiles(())
    durations = [res.duration_s for res in chosen if res.duration_s]
    summary.duration_s = {"mean": statistics.fmean(durations) if durations else None}
    return {**summary.to_dict(), "attempts": {"policy": policy, **attempts_of(results)}}


def summarize_run(
    results: Sequence[RolloutResult], *, r: int, policy: AttemptPolicy, calls_known: bool = True
) -> dict[str, Any]:
    """A run's summary: :func:`attempt_summary` when any result is a later attempt, else
    :func:`~rolltap.results.summary.summarize` of them all (a run never retried)."""
    if any(res.attempt > 0 for res in results):
        return attempt_summary(results, r=r, policy=policy, calls_known=calls_known)
    return summarize(results, r=r)


def failure_code(result: RolloutResult) -> str:
    """The code a failed result is retried by: its error code, else its status (an
    ``interrupted`` session names no code)."""
    return result.error_code or result.status


def _classes(cls: type[RolltapError]) -> Iterable[type[RolltapError]]:
    yield cls
    for kid in cls.__subclasses__():
        if kid.__module__.startswith("rolltap."):  # a test's own errors are no rollout's
            yield from _classes(kid)


def _spoken(name: str) -> str:
    """``UpstreamStatusError`` → ``upstream_status``: how a user may name its code."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name.removesuffix("Error")).lower()


def known_failure_codes() -> list[str]:
    """The codes a failed rollout can be stored under: every rolltap error's (those of the
    modules loaded: the store's included wherever a run config is), the failure rule's
    own (:mod:`rolltap.results.failure`) and ``interrupted``; sorted."""
    own = {HARNESS_ERROR, MODEL_ERROR, REWARD_ERROR, INTERRUPTED}
    return sorted({cls.code for cls in _classes(RolltapError)} | own)


def _nearest(code: str, known: list[str]) -> list[str]:
    """Known codes near ``code``: by their spelling, or by their error class's name."""
    names = {name: name for name in known}
    names.update({_spoken(cls.__name__): cls.code for cls in _classes(RolltapError)})
    near = difflib.get_close_matches(code, list(names), n=3)
    return list(dict.fromkeys(names[name] for name in near))


def check_codes(codes: Iterable[str]) -> list[str] | None:
    """``codes`` split on commas, stripped, each once (``all``: None, every code);
    ValueError naming an unknown one (with the nearest known codes) and listing every
    known code."""
    wanted = list(dict.fromkeys(c.strip() for text in codes for c in text.split(",") if c.strip()))
    if wanted == ["all"]:
        return None
    if not wanted:
        raise ValueError("name at least one error code (or all)")
    known = known_failure_codes()
    for code in wanted:
        if code not in known:
            near = _nearest(code, known)
            hint = f" (did you mean {' or '.join(near)}?)" if near else ""
            raise ValueError(f"unknown error code {code!r}{hint}; known codes: {', '.join(known)}")
    return wanted
