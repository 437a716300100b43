"""Reading runs' aggregates (``rolltap_run_stats``): summaries, histograms, interrupted counts.

Two queries for any number of runs — their stat rows (a bounded number per run:
statuses, error codes, histogram bins, pass@k groups) and their leases — whatever the
runs' sizes. An unfinished session of a run whose lease expired reads ``interrupted``
(:func:`rolltap.store.lease.effective_status`): the counts move here too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.lease import INTERRUPTED
from rolltap.store.models import UNFINISHED_STATUSES
from rolltap.store.rollup import LOG, bin_edges
from rolltap.store.runstats import pass_at, reward_stats
from rolltap.store.schema import leases, run_stats

__all__ = ["RunStats", "read_run_stats"]

#: at most this many bars in a histogram (adjacent bins merge beyond it)
MAX_BARS = 40
_NO_PERCENTILES = {"p50": None, "p90": None, "p99": None}
_HISTOGRAMS = {"reward": "bin_reward", "duration_s": "bin_duration", "tokens": "bin_tokens"}


@dataclass(slots=True)
class RunStats:
    """One run's aggregate rows: ``rows[(stat, key)] = (n, total, message)``."""

    rows: dict[tuple[str, str], tuple[int, float, str | None]] = field(default_factory=dict)
    #: whether the run's lease expired (its unfinished sessions read interrupted)
    expired: bool = False

    def n(self, stat: str, key: str = "") -> int:
        return self.rows.get((stat, key), (0, 0.0, None))[0]

    def total(self, stat: str, key: str = "") -> float:
        return self.rows.get((stat, key), (0, 0.0, None))[1]

    def keyed(self, stat: str) -> dict[str, tuple[int, float, str | None]]:
        return {k: v for (s, k), v in self.rows.items() if s == stat and v[0]}

    def statuses(self) -> dict[str, int]:
        """Sessions by status as readers see them."""
        out: dict[str, int] = {}
        for status, (n, _t, _m) in self.keyed("status").items():
            shown = INTERRUPTED if self.expired and status in UNFINISHED_STATUSES else status
            out[shown] = out.get(shown, 0) + n
        return dict(sorted(out.items()))

    def interrupted(self) -> tuple[int, int]:
        """(unfinished sessions read as interrupted, all interrupted sessions)."""
        read_so = sum(self.n("status", s) for s in UNFINISHED_STATUSES) if self.expired else 0
        return read_so, read_so + self.n("status", INTERRUPTED)

    def errors(self) -> dict[str, dict[str, Any]]:
        """Failed sessions by error code (most first), with the earliest's message."""
        found = self.keyed("error")
        ordered = sorted(found.items(), key=lambda item: (-item[1][0], item[0]))
        return {code: {"count": n, "first_message": msg} for code, (n, _t, msg) in ordered}

    def pass_groups(self) -> list[tuple[int, int, int]]:
        out = []
        for key, (tasks, _t, _m) in self.keyed("pass").items():
            rewarded, passed = key.split("/")
            out.append((int(rewarded), int(passed), tasks))
        return out

    def summary(self, rollouts: int, r: int) -> dict[str, Any]:
        """The run's summary (:func:`rolltap.rollouts.summary.summarize`'s shape); what
        only its events can say (latency percentiles, model calls) is ``None``."""
        durations = self.n("duration")
        out: dict[str, Any] = {
            "rollouts": rollouts,
            "statuses": self.statuses(),
            "reward": reward_stats(self.n("reward"), self.total("reward"), self.total("reward_sq")),
            "tokens": {
                "prompt": round(self.total("tokens", "prompt")),
                "completion": round(self.total("tokens", "completion")),
            },
            "model_calls": None,
            "model_errors": None,
            "no_model_calls": None,
            "token_drift": None,
            "errors": self.errors(),
            "latency_ms": dict(_NO_PERCENTILES),
            "ttfc_ms": dict(_NO_PERCENTILES),
            "duration_s": {"mean": self.total("duration") / durations if durations else None},
        }
        if r > 1:
            out["pass_at_k"] = pass_at(self.pass_groups(), r)
        return out

    def histograms(self) -> dict[str, dict[str, Any]]:
        """Rewards, durations and tokens per rollout in their fixed bins, from the least
        to the greatest bin holding any: ``{"lo", "hi", "counts", "labels"}`` each."""
        out = {}
        for name, stat in _HISTOGRAMS.items():
            bins = self.keyed(stat)
            if bins:
                out[name] = _histogram(LOG if name != "reward" else "linear", bins)
        return out


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
