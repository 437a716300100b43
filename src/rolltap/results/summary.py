"""A run's summary: rollouts by status, mean reward with a 95% interval, pass@k, errors,
tokens, model calls, latencies.

One shape, :class:`RunSummary`, made from the rollouts' results in memory
(:meth:`RunSummary.of_results`, what ``rolltap eval`` prints) or from a stored run's
aggregates (:meth:`RunSummary.of_rollups`, what the store and the viewer report); both
give the same numbers for the same rollouts. :meth:`RunSummary.to_dict` is its JSON form.

``errors`` counts the rollouts that did not succeed by error code (the rule:
:mod:`rolltap.results.failure`) with each code's first message:
``{"upstream_unreachable": {"count": 8, "first_message": "…"}}``. ``token_drift`` counts
the turns whose prompt ids drifted from the previous turn's (``tokens.drift`` in their
events) and the rollouts with at least one. ``policy_versions`` (only when an answer
carried one) lists the policy versions the answers were generated under, first seen
first, and how many rollouts span more than one. What only a run's events can say (model
calls, latencies, drift, versions) is ``None`` in a summary made from aggregates; a
rollout ended by the staleness bound counts under ``statuses["stale"]`` (not an error).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rolltap.results.confidence import percentiles, reward_stats, reward_stats_of
from rolltap.results.passk import ks_for, pass_at, pass_at_k, passed
from rolltap.results.rollout import RolloutResult
from rolltap.results.rollups import Rollups

__all__ = ["RunSummary", "summarize"]


@dataclass(slots=True)
class RunSummary:
    """The summary of a run's rollouts (see the module docs for each field)."""

    rollouts: int
    statuses: dict[str, int]
    #: ``{"mean", "ci95", "n"}`` over the rewarded rollouts
    reward: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    errors: dict[str, dict[str, Any]]
    model_calls: int | None = None
    model_errors: int | None = None
    no_model_calls: int | None = None
    #: ``{"turns", "rollouts"}``
    token_drift: dict[str, int] | None = None
    latency_ms: dict[str, float | None] = field(default_factory=lambda: percentiles(()))
    ttfc_ms: dict[str, float | None] = field(default_factory=lambda: percentiles(()))
    #: what the gateway itself added to each call (``timing.gateway_ms``; events only)
    gateway_ms: dict[str, float | None] = field(default_factory=lambda: percentiles(()))
    #: ``{"mean"}`` of the rollouts' durations (aggregates only)
    duration_s: dict[str, float | None] | None = None
    #: ``{"pass@k": …}``; only for runs of more than one sample per task
    pass_at_k: dict[str, float] | None = None
    #: ``{"versions": [...], "spanning": n}``; only when an answer carried a version
    policy_versions: dict[str, Any] | None = None

    @classmethod
    def of_results(cls, results: Sequence[RolloutResult], *, r: int = 1) -> RunSummary:
        """The summary of ``results``, a run of ``r`` samples per task."""
        return cls(
            rollouts=len(results),
            statuses=dict(sorted(Counter(res.status for res in results).items())),
            reward=reward_stats_of([res.reward for res in results if res.reward is not None]),
            prompt_tokens=sum(res.calls.prompt_tokens for res in results),
            completion_tokens=sum(res.calls.completion_tokens for res in results),
            errors=_errors(results),
            model_calls=sum(res.calls.calls for res in results),
            model_errors=sum(res.calls.errors for res in results),
            no_model_calls=sum(res.no_model_calls for res in results),
            token_drift={
                "turns": sum(res.calls.drifted for res in results),
                "rollouts": sum(res.calls.drifted > 0 for res in results),
            },
            latency_ms=percentiles([ms for res in results for ms in res.calls.latencies_ms]),
            ttfc_ms=percentiles([ms for res in results for ms in res.calls.ttfc_ms]),
            gateway_ms=percentiles([ms for res in results for ms in res.calls.gateway_ms]),
            pass_at_k=_pass_at(results, r) if r > 1 else None,
            policy_versions=_versions(results),
        )

    @classmethod
    def of_rollups(cls, rollups: Rollups, *, rollouts: int, r: int = 1) -> RunSummary:
        """The summary of a stored run of ``rollouts`` sessions, ``r`` samples per task,
        from its aggregates; what only its events can say is ``None``."""
        durations = rollups.n("duration")
        mean_duration = rollups.total("duration") / durations if durations else None
        return cls(
            rollouts=rollouts,
            statuses=rollups.statuses(),
            reward=reward_stats(
                rollups.n("reward"), rollups.total("reward"), rollups.total("reward_sq")
            ),
            prompt_tokens=round(rollups.total("tokens", "prompt")),
            completion_tokens=round(rollups.total("tokens", "completion")),
            errors=rollups.errors(),
            duration_s={"mean": mean_duration},
            pass_at_k=pass_at(rollups.pass_groups(), r) if r > 1 else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready summary (``duration_s`` and ``pass_at_k`` only when known)."""
        out: dict[str, Any] = {
            "rollouts": self.rollouts,
            "statuses": dict(self.statuses),
            "reward": dict(self.reward),
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "model_calls": self.model_calls,
            "model_errors": self.model_errors,
            "no_model_calls": self.no_model_calls,
            "token_drift": None if self.token_drift is None else dict(self.token_drift),
            "errors": {code: dict(entry) for code, entry in self.errors.items()},
            "latency_ms": dict(self.latency_ms),
            "ttfc_ms": dict(self.ttfc_ms),
            "gateway_ms": dict(self.gateway_ms),
        }
        if self.duration_s is not None:
            out["duration_s"] = dict(self.duration_s)
        if self.pass_at_k is not None:
            out["pass_at_k"] = dict(self.pass_at_k)
        if self.policy_versions is not None:
            out["policy_versions"] = dict(self.policy_versions)
        return out


def summarize(results: Sequence[RolloutResult], *, r: int = 1) -> dict[str, Any]:
    """A JSON-ready summary of a run's rollouts: :class:`RunSummary`'s, from ``results``."""
    return RunSummary.of_results(results, r=r).to_dict()


def _pass_at(results: Sequence[RolloutResult], r: int) -> dict[str, float]:
    by_task: dict[str, list[float]] = defaultdict(list)
    for res in results:
        if res.reward is not None:
            by_task[res.task_id].append(res.reward)
    out: dict[str, float] = {}
    for k in ks_for(r):
        scores = [
            pass_at_k(len(rw), sum(passed(x) for x in rw), k)
            for rw in by_task.values()
            if len(rw) >= k
        ]
        if scores:
            out[f"pass@{k}"] = statistics.fmean(scores)
    return out


def _versions(results: Sequence[RolloutResult]) -> dict[str, Any] | None:
    """The policy versions the run's answers carry, first seen first, and the rollouts
    that span more than one; None when no answer carried a version."""
    seen = list(dict.fromkeys(v for res in results for v in res.calls.versions))
    if not seen:
        return None
    return {"versions": seen, "spanning": sum(len(res.calls.versions) > 1 for res in results)}


def _errors(results: Sequence[RolloutResult]) -> dict[str, dict[str, Any]]:
    """Rollouts that did not succeed, by error code (most first), each code's first message."""
    out: dict[str, dict[str, Any]] = {}
    for res in results:
        if res.error_code is not None:
            message = res.error_message or res.error or res.status
            entry = out.setdefault(res.error_code, {"count": 0, "first_message": message})
            entry["count"] += 1
    return dict(sorted(out.items(), key=lambda item: -int(item[1]["count"])))
