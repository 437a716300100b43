"""Results: how rollouts end and what a run of them adds up to.

- :mod:`~rolltap.results.statuses`: the statuses a rollout (a stored session) can end in,
  and the error codes;
- :mod:`~rolltap.results.failure`: the one rule for a failed rollout's error code;
- :mod:`~rolltap.results.rollout`: :class:`RolloutResult`, one rollout's result;
- :mod:`~rolltap.results.passk` and :mod:`~rolltap.results.confidence`: pass@k, the mean
  reward's 95% interval, latency percentiles;
- :mod:`~rolltap.results.summary`: :class:`RunSummary`, from results in memory or from a
  stored run's aggregates (:mod:`~rolltap.results.rollups`), the same numbers either way.

It imports nothing of rolltap but ``errors``: the store, the runner, serve, the viewer
and the CLI all use it.
"""

from rolltap.results.failure import FailureTrace, failure_of
from rolltap.results.passk import PASS_THRESHOLD, pass_at_k
from rolltap.results.rollout import CallStats, RolloutResult
from rolltap.results.rollups import Rollups
from rolltap.results.statuses import FAILED_STATUSES, STATUSES, UNFINISHED_STATUSES
from rolltap.results.summary import RunSummary, summarize

__all__ = [
    "FAILED_STATUSES",
    "PASS_THRESHOLD",
    "STATUSES",
    "UNFINISHED_STATUSES",
    "CallStats",
    "FailureTrace",
    "RolloutResult",
    "Rollups",
    "RunSummary",
    "failure_of",
    "pass_at_k",
    "summarize",
]
