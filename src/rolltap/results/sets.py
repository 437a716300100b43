"""An eval set's summary: its runs' rollouts counted together.

Each run contributes the results its own summary counts (one attempt per rollout slot by
its attempt policy), so the set's ``rollouts``, ``statuses``, ``errors`` and tokens are the
sums of its runs' and its reward the mean over every rewarded rollout of the set. What
only a run's model calls say is summed when every run's summary knows it. pass@k only
when every run drew the same number of samples per task.

>>> from rolltap.results.rollout import RolloutResult as R
>>> one, two = [R("a", 0, "s1", "completed", reward=1.0)], [R("b", 0, "s2", "failed", reward=0.0)]
>>> total = set_summary([(one, "best", 1), (two, "best", 1)], [{}, {}])
>>> total["rollouts"], total["statuses"], total["reward"]["mean"]
(2, {'completed': 1, 'failed': 1}, 0.5)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rolltap.results.attempts import AttemptPolicy, pick
from rolltap.results.rollout import RolloutResult
from rolltap.results.summary import RunSummary

__all__ = ["set_summary"]

#: counts only a run's model calls give, summed over the runs when all know them
_SUMMED = ("model_calls", "model_errors", "no_model_calls")


def set_summary(
    runs: Sequence[tuple[Sequence[RolloutResult], AttemptPolicy, int]],
    summaries: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The set's summary from each run's (results, attempt policy, samples per task) and
    each run's own summary (for what only model calls say)."""
    counted = [res for results, policy, _r in runs for res in pick(results, policy)]
    samples = {r for _res, _policy, r in runs}
    # pass@k only for one r: of_results leaves it out at r = 1
    same_r = samples.pop() if len(samples) == 1 else 1
    summary = RunSummary.of_results(counted, r=same_r).to_dict()
    for key in _SUMMED:
        values = [s.get(key) for s in summaries]
        known = all(isinstance(v, int) for v in values)
        summary[key] = sum(v for v in values if isinstance(v, int)) if known else None
    for key in ("latency_ms", "ttfc_ms", "gateway_ms", "token_drift", "policy_versions"):
        summary.pop(key, None)  # per call: each run's own
    summary["runs"] = len(runs)
    return summary
