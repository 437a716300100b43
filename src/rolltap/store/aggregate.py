"""Run summaries read from the runs' aggregates (``rolltap.store.rollup``), never their
sessions or events.

:func:`run_summaries` gives, for any number of runs, the summary ``rolltap eval``
prints (:class:`rolltap.results.RunSummary`'s JSON form) in three queries; what only
a run's events can say — per-call latency percentiles, model call counts — is ``None``
there and comes from the summary a run's owner stored (:func:`stored_summary`).
:func:`histograms` gives rewards, durations and tokens per rollout in fixed bins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.attempt_read import retried, slot_summary
from rolltap.store.errors import StoreNotFoundError
from rolltap.store.rollup_read import read_run_stats
from rolltap.store.schema import runs
from rolltap.store.serialize import load_doc

__all__ = [
    "histograms",
    "run_r",
    "run_summaries",
    "stored_summary",
    "summary_of_run",
]


def run_r(config: Mapping[str, Any]) -> int:
    """Samples per task a run was planned with (its stored ``run.r``; 1 when unknown)."""
    stored = config.get("run")
    value = stored.get("r", 1) if isinstance(stored, Mapping) else 1
    return value if isinstance(value, int) and value > 0 else 1


def stored_summary(text: str | None) -> dict[str, Any] | None:
    """The summary a run's owner stored, or None."""
    if text is None:
        return None
    doc = load_doc(text)
    doc.pop("token", None)  # the write's own receipt (see WriteRunSummaryOp)
    return doc


async def summary_of_run(conn: AsyncConnection, run_id: str) -> dict[str, Any]:
    """Run ``run_id``'s stored summary, else its summary from its aggregates (with its
    histograms). ``stored`` says which it is."""
    query = select(runs.c.config, runs.c.summary, runs.c.n_sessions).where(runs.c.id == run_id)
    row = (await conn.execute(query)).first()
    if row is None:
        raise StoreNotFoundError(f"no run {run_id!r}")
    stored = stored_summary(row.summary)
    if stored is not None:
        return {**stored, "stored": True}
    stats = (await read_run_stats(conn, [run_id]))[run_id]
    config = load_doc(row.config)
    if retried(config):
        summary = await slot_summary(conn, run_id, config, run_r(config))
    else:
        summary = stats.summary(int(row.n_sessions), run_r(config))
    return {**summary, "histograms": stats.histograms(), "stored": False}


async def run_summaries(
    conn: AsyncConnection, runs_of: Mapping[str, tuple[int, int]], now: float | None = None
) -> dict[str, dict[str, Any]]:
    """The summary of each run in ``runs_of`` (run id → (its sessions, samples per task))."""
    stats = await read_run_stats(conn, list(runs_of), now)
    return {rid: stats[rid].summary(n, r) for rid, (n, r) in sorted(runs_of.items())}


async def histograms(conn: AsyncConnection, run_id: str) -> dict[str, dict[str, Any]]:
    """Rewards, durations and tokens per rollout of a run in fixed bins:
    ``{"reward": {"lo", "hi", "counts", "labels"}, …}``."""
    return (await read_run_stats(conn, [run_id]))[run_id].histograms()
