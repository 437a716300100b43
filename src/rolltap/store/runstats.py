"""The arithmetic of run summaries: mean reward with a 95% interval, pass@k.

Shared by ``rolltap eval`` (from its results in memory) and the store's SQL summary of
a stored run (from sums and counts), so both report the same numbers.

pass@k uses the unbiased estimator of Chen et al. (2021): per task with ``n`` rollouts
of which ``c`` passed, ``1 - C(n-c, k) / C(n, k)``, averaged over tasks.

>>> round(pass_at_k(4, 1, 1), 3), round(pass_at_k(4, 1, 4), 3)
(0.25, 1.0)
>>> [round(x, 2) for x in reward_stats(2, 1.0, 1.0)["ci95"]]
[-0.48, 1.48]
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["PASS_THRESHOLD", "ks_for", "pass_at", "pass_at_k", "reward_stats"]

#: reward at or above which a rollout counts as passed for pass@k
PASS_THRESHOLD = 1.0
_Z95 = 1.959964


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` draws (of ``n``, ``c`` correct) passes."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def ks_for(r: int) -> list[int]:
    """The k reported for ``r`` samples per task: powers of two up to ``r``, and ``r``."""
    return sorted({k for k in (1, 2, 4, 8, 16, 32, 64, r) if k <= r})


def pass_at(groups: Iterable[tuple[int, int, int]], r: int) -> dict[str, float]:
    """pass@k for each k of :func:`ks_for` from ``(n, c, tasks)`` groups: ``tasks`` tasks
    each with ``n`` rewarded rollouts of which ``c`` passed. Tasks with fewer than k
    rollouts do not count for that k."""
    counted = list(groups)
    out: dict[str, float] = {}
    for k in ks_for(r):
        weight = sum(tasks for n, _c, tasks in counted if n >= k)
        if weight:
            total = sum(pass_at_k(n, c, k) * tasks for n, c, tasks in counted if n >= k)
            out[f"pass@{k}"] = total / weight
    return out


def reward_stats(n: int, total: float, squares: float) -> dict[str, Any]:
    """Mean and 95% interval of ``n`` rewards from their sum and sum of squares."""
    if not n:
        return {"mean": None, "ci95": None, "n": 0}
    mean = total / n
    half = 0.0
    if n > 1:
        variance = max(0.0, (squares - n * mean * mean) / (n - 1))
        half = _Z95 * math.sqrt(variance) / math.sqrt(n)
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": n}
