"""Run summaries: mean reward with a 95% interval, pass@k, statuses, errors, tokens, latency.

pass@k uses the unbiased estimator of Chen et al. (2021): per task with ``n`` rollouts
of which ``c`` passed, ``1 - C(n-c, k) / C(n, k)``, averaged over tasks. A rollout
*passes* when its reward is at least :data:`PASS_THRESHOLD` (1.0: every weighted
component fully satisfied). ``errors`` counts the rollouts that did not succeed by
error code (see :func:`~rolltap.rollouts.results.failure_of`) with each code's first
message: ``{"upstream_unreachable": {"count": 8, "first_message": "…"}}``.
``token_drift`` counts the turns whose prompt ids drifted from the previous turn's
(``tokens.drift`` in their events) and the rollouts with at least one.

>>> round(pass_at_k(4, 1, 1), 3), round(pass_at_k(4, 1, 4), 3)
(0.25, 1.0)
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from rolltap.rollouts.results import RolloutResult
from rolltap.store.runstats import PASS_THRESHOLD, ks_for, pass_at_k

__all__ = ["PASS_THRESHOLD", "pass_at_k", "percentile", "summarize"]

_Z95 = 1.959964


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank on sorted values); ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def _reward_stats(rewards: list[float]) -> dict[str, Any]:
    if not rewards:
        return {"mean": None, "ci95": None, "n": 0}
    mean = statistics.fmean(rewards)
    half = _Z95 * statistics.stdev(rewards) / math.sqrt(len(rewards)) if len(rewards) > 1 else 0.0
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": len(rewards)}


def _pass_at(results: Sequence[RolloutResult], r: int) -> dict[str, float]:
    by_task: dict[str, list[float]] = defaultdict(list)
    for res in results:
        if res.reward is not None:
            by_task[res.task_id].append(res.reward)
    ks = ks_for(r)
    out: dict[str, float] = {}
    for k in ks:
        scores = [
            pass_at_k(len(rw), sum(x >= PASS_THRESHOLD for x in rw), k)
            for rw in by_task.values()
            if len(rw) >= k
        ]
        if scores:
            out[f"pass@{k}"] = statistics.fmean(scores)
    return out


def _latency(values: list[float]) -> dict[str, float | None]:
    return {f"p{q}": percentile(values, q) for q in (50, 90, 99)}


def _errors(results: Sequence[RolloutResult]) -> dict[str, dict[str, Any]]:
    """Rollouts that did not succeed, by error code (most first), each code's first message."""
    out: dict[str, dict[str, Any]] = {}
    for res in results:
        if res.error_code is not None:
            message = res.error_message or res.error or res.status
            entry = out.setdefault(res.error_code, {"count": 0, "first_message": message})
            entry["count"] += 1
    return dict(sorted(out.items(), key=lambda item: -int(item[1]["count"])))


def summarize(results: Sequence[RolloutResult], *, r: int = 1) -> dict[str, Any]:
    """A JSON-ready summary of a run's rollouts (see the module docs for definitions)."""
    latencies = [ms for res in results for ms in res.calls.latencies_ms]
    ttfc = [ms for res in results for ms in res.calls.ttfc_ms]
    rewards = [res.reward for res in results if res.reward is not None]
    out: dict[str, Any] = {
        "rollouts": len(results),
        "statuses": dict(sorted(Counter(res.status for res in results).items())),
        "reward": _reward_stats(rewards),
        "tokens": {
            "prompt": sum(res.calls.prompt_tokens for res in results),
            "completion": sum(res.calls.completion_tokens for res in results),
        },
        "model_calls": sum(res.calls.calls for res in results),
        "model_errors": sum(res.calls.errors for res in results),
        "no_model_calls": sum(res.no_model_calls for res in results),
        "token_drift": {
            "turns": sum(res.calls.drifted for res in results),
            "rollouts": sum(res.calls.drifted > 0 for res in results),
        },
        "errors": _errors(results),
        "latency_ms": _latency(latencies),
        "ttfc_ms": _latency(ttfc),
    }
    if r > 1:
        out["pass_at_k"] = _pass_at(results, r)
    return out
