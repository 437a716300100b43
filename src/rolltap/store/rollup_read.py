"""Reading runs' aggregates (``rolltap_run_stats``): summaries, histograms, interrupted counts.

What the rows mean (statuses, errors, pass@k groups) is :class:`rolltap.results.Rollups`;
the summary made of them :class:`rolltap.results.RunSummary`.

Two queries for any number of runs — their stat rows (a bounded number per run:
statuses, error codes, histogram bins, pass@k groups) and their leases — whatever the
runs' sizes. An unfinished session of a run whose lease expired reads ``interrupted``
(:func:`rolltap.store.lease.effective_status`): the counts move here too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.results.rollups import Rollups
from rolltap.results.summary import RunSummary
from rolltap.store.rollup import LOG, bin_edges, reward_bin
from rolltap.store.schema import leases, run_stats

__all__ = ["RunStats", "read_run_stats", "reward_histogram"]

#: at most this many bars in a histogram (adjacent bins merge beyond it)
MAX_BARS = 40
_HISTOGRAMS = {"reward": "bin_reward", "duration_s": "bin_duration", "tokens": "bin_tokens"}


@dataclass(slots=True)
class RunStats(Rollups):
    """One run's aggregate rows (:class:`rolltap.results.Rollups`) and their histograms."""

    def summary(self, rollouts: int, r: int) -> dict[str, Any]:
        """The run's summary (:class:`rolltap.results.RunSummary`'s JSON form); what only
        its events can say (latency percentiles, model calls) is ``None``."""
        return RunSummary.of_rollups(self, rollouts=rollouts, r=r).to_dict()

    def histograms(self) -> dict[str, dict[str, Any]]:
        """Rewards, durations and tokens per rollout in their fixed bins, from the least
        to the greatest bin holding any: ``{"lo", "hi", "counts", "labels"}`` each."""
        out = {}
        for name, stat in _HISTOGRAMS.items():
            bins = self.keyed(stat)
            if bins:
                out[name] = _histogram(LOG if name != "reward" else "linear", bins)
        return out


def reward_histogram(rewards: Iterable[float]) -> dict[str, Any] | None:
    """The reward histogram of ``rewards`` in the run histograms' bins (None: no reward):
    a scoring's, whose rewards no rollup counts."""
    bins: dict[str, tuple[int, float, str | None]] = {}
    for value in rewards:
        key = reward_bin(value)
        bins[key] = (bins.get(key, (0, 0.0, None))[0] + 1, 0.0, None)
    return _histogram("linear", bins) if bins else None


def _histogram(scale: str, bins: Mapping[str, tuple[int, float, str | None]]) -> dict[str, Any]:
    zero = bins.get("z", (0, 0.0, None))[0]
    numbered = {int(k): v[0] for k, v in bins.items() if k != "z"}
    spans: list[tuple[float, float, int]] = []
    if numbered:
        lo_b, hi_b = min(numbered), max(numbered)
        step = max(1, -(-(hi_b - lo_b + 1) // MAX_BARS))
        for b in range(lo_b, hi_b + 1, step):
            count = sum(numbered.get(b + i, 0) for i in range(step))
            spans.append(
                (bin_edges(scale, str(b))[0], bin_edges(scale, str(b + step - 1))[1], count)
            )
    labels = [f"{_short(lo)}–{_short(hi)}" for lo, hi, _c in spans]
    if zero:
        spans.insert(0, (0.0, 0.0, zero))
        labels.insert(0, "0")
    return {
        "lo": spans[0][0], "hi": spans[-1][1], "counts": [c for _l, _h, c in spans],
        "labels": labels, "scale": scale,
    }  # fmt: skip


def _short(value: float) -> str:
    return f"{value:.3g}"


async def read_run_stats(
    conn: AsyncConnection, run_ids: Sequence[str], now: float | None = None
) -> dict[str, RunStats]:
    """The aggregates of ``run_ids`` (each present, empty for a run with no sessions)."""
    ids = sorted(set(run_ids))
    out: dict[str, RunStats] = defaultdict(RunStats)
    if not ids:
        return out
    now = time.time() if now is None else now
    query = select(
        run_stats.c.run_id, run_stats.c.stat, run_stats.c.key, run_stats.c.n,
        run_stats.c.total, run_stats.c.message,
    ).where(run_stats.c.run_id.in_(ids))  # fmt: skip
    for run_id, stat, key, n, total, message in await conn.execute(query):
        out[run_id].rows[(stat, key)] = (int(n), float(total), message)
    expiry = select(leases.c.run_id, leases.c.expires_at).where(leases.c.run_id.in_(ids))
    for run_id, expires_at in await conn.execute(expiry):
        out[run_id].expired = expires_at is not None and expires_at < now
    return {run_id: out[run_id] for run_id in ids}
