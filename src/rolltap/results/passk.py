"""pass@k: the chance that at least one of k rollouts of a task passes.

The unbiased estimator of Chen et al. (2021): per task with ``n`` rewarded rollouts of
which ``c`` passed, ``1 - C(n-c, k) / C(n, k)``, averaged over tasks. A rollout *passes*
when its reward is at least :data:`PASS_THRESHOLD` (1.0: every weighted component fully
satisfied). The same arithmetic serves ``rolltap eval`` (from its results in memory)
and the store's summary of a stored run (from its ``(n, c)`` groups).

>>> round(pass_at_k(4, 1, 1), 3), round(pass_at_k(4, 1, 4), 3)
(0.25, 1.0)
>>> pass_at([(4, 1, 1), (4, 4, 1)], 2)
{'pass@1': 0.625, 'pass@2': 0.75}
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["PASS_THRESHOLD", "ks_for", "pass_at", "pass_at_k", "passed"]

#: reward at or above which a rollout counts as passed for pass@k
PASS_THRESHOLD = 1.0


def passed(reward: float) -> bool:
    """Whether a rollout with ``reward`` passes."""
    return reward >= PASS_THRESHOLD


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
