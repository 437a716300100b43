"""Mean reward with a 95% interval (normal approximation), and latency percentiles.

From the rewards themselves (a run in memory) or from their count, sum and sum of
squares (the store's aggregates): the same estimate either way, up to rounding.

>>> [round(x, 2) for x in reward_stats(2, 1.0, 1.0)["ci95"]]
[-0.48, 1.48]
>>> [round(x, 2) for x in reward_stats_of([0.0, 1.0])["ci95"]]
[-0.48, 1.48]
>>> percentile([3.0, 1.0, 2.0], 50), percentiles([])
(2.0, {'p50': None, 'p90': None, 'p99': None})
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["PERCENTILES", "percentile", "percentiles", "reward_stats", "reward_stats_of"]

#: the percentiles a summary reports of per-call latencies
PERCENTILES = (50, 90, 99)
_Z95 = 1.959964


def _estimate(n: int, mean: float, stdev: float) -> dict[str, Any]:
    half = _Z95 * stdev / math.sqrt(n) if n > 1 else 0.0
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": n}


def reward_stats_of(rewards: Sequence[float]) -> dict[str, Any]:
    """Mean and 95% interval of ``rewards``: ``{"mean", "ci95", "n"}``."""
    if not rewards:
        return {"mean": None, "ci95": None, "n": 0}
    stdev = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    return _estimate(len(rewards), statistics.fmean(rewards), stdev)


def reward_stats(n: int, total: float, squares: float) -> dict[str, Any]:
    """:func:`reward_stats_of` ``n`` rewards known by their sum and sum of squares."""
    if not n:
        return {"mean": None, "ci95": None, "n": 0}
    mean = total / n
    variance = max(0.0, (squares - n * mean * mean) / (n - 1)) if n > 1 else 0.0
    return _estimate(n, mean, math.sqrt(variance))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank on sorted values); ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """``{"p50", "p90", "p99"}`` of ``values`` (each ``None`` when empty)."""
    return {f"p{q}": percentile(values, q) for q in PERCENTILES}
