"""Run summaries computed in SQL from the sessions' derived columns, never their events.

:func:`run_summaries` gives, for any number of runs, the summary ``rolltap eval``
prints (:func:`rolltap.rollouts.summary.summarize`'s shape) in four queries; what only a
run's events can say — per-call latency percentiles, model call counts — is ``None``
there and comes from the summary a run's owner stored (:func:`stored_summary`).
:func:`histograms` bins rewards, durations and tokens per rollout in two queries.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.errors import StoreNotFoundError
from rolltap.store.lease import INTERRUPTED
from rolltap.store.models import UNFINISHED_STATUSES
from rolltap.store.runstats import PASS_THRESHOLD, pass_at, reward_stats
from rolltap.store.schema import leases, runs, sessions
from rolltap.store.serialize import load_doc

__all__ = [
    "effective_status",
    "histograms",
    "run_r",
    "run_summaries",
    "stored_summary",
    "summary_from_parts",
    "summary_of_run",
]

_NO_PERCENTILES = {"p50": None, "p90": None, "p99": None}
HISTOGRAM_BINS = 20


def effective_status(now: float) -> ColumnElement[Any]:
    """A session's status as readers see it (over sessions outer-joined with leases):
    an unfinished session of a run whose lease expired reads ``interrupted``."""
    expired = and_(leases.c.expires_at.is_not(None), leases.c.expires_at < now)
    unfinished = sessions.c.status.in_(sorted(UNFINISHED_STATUSES))
    return case((and_(unfinished, expired), literal(INTERRUPTED)), else_=sessions.c.status)


def _joined() -> Any:
    return sessions.outerjoin(leases, leases.c.run_id == sessions.c.run_id)


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
    """Run ``run_id``'s stored summary, else its SQL summary (with its histograms).

    ``stored`` says which it is.
    """
    query = select(runs.c.config, runs.c.summary).where(runs.c.id == run_id)
    row = (await conn.execute(query)).first()
    if row is None:
        raise StoreNotFoundError(f"no run {run_id!r}")
    stored = stored_summary(row.summary)
    if stored is not None:
        return {**stored, "stored": True}
    summary = (await run_summaries(conn, {run_id: run_r(load_doc(row.config))}))[run_id]
    return {**summary, "histograms": await histograms(conn, run_id), "stored": False}


async def _statuses(
    conn: AsyncConnection, run_ids: Sequence[str], now: float
) -> dict[str, dict[str, int]]:
    status = effective_status(now).label("s")
    query = (
        select(sessions.c.run_id, status, func.count())
        .select_from(_joined())
        .where(sessions.c.run_id.in_(run_ids))
        .group_by(sessions.c.run_id, status)
    )
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for run_id, name, count in await conn.execute(query):
        out[run_id][name] = int(count)
    return out


async def _sums(conn: AsyncConnection, run_ids: Sequence[str]) -> dict[str, Any]:
    c = sessions.c
    query = (
        select(
            c.run_id, func.count(), func.count(c.reward), func.sum(c.reward),
            func.sum(c.reward * c.reward), func.sum(c.prompt_tokens),
            func.sum(c.completion_tokens), func.sum(c.duration_s), func.count(c.duration_s),
        )
        .where(c.run_id.in_(run_ids))
        .group_by(c.run_id)
    )  # fmt: skip
    return {row[0]: row[1:] for row in await conn.execute(query)}


async def _pass_groups(
    conn: AsyncConnection, run_ids: Sequence[str]
) -> dict[str, list[tuple[int, int, int]]]:
    """Per run: (rewarded rollouts, passed, tasks) groups over its tasks."""
    c = sessions.c
    passed = func.sum(case((c.reward >= PASS_THRESHOLD, 1), else_=0))
    per_task = (
        select(c.run_id, func.count(c.reward).label("n"), passed.label("p"))
        .where(c.run_id.in_(run_ids), c.reward.is_not(None))
        .group_by(c.run_id, func.coalesce(c.task_id, c.id))
        .subquery()
    )
    query = select(per_task.c.run_id, per_task.c.n, per_task.c.p, func.count()).group_by(
        per_task.c.run_id, per_task.c.n, per_task.c.p
    )
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for run_id, n, p, tasks in await conn.execute(query):
        out[run_id].append((int(n), int(p or 0), int(tasks)))
    return out


async def _errors(
    conn: AsyncConnection, run_ids: Sequence[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per run: failed sessions by error code (most first) with the earliest's message."""
    c = sessions.c
    part = (c.run_id, c.error_code)
    ranked = (
        select(
            c.run_id, c.error_code, c.error_message,
            func.count().over(partition_by=part).label("n"),
            func.row_number().over(partition_by=part, order_by=(c.created_at, c.id)).label("rank"),
        )
        .where(c.run_id.in_(run_ids), c.error_code.is_not(None))
        .subquery()
    )  # fmt: skip
    query = select(ranked.c.run_id, ranked.c.error_code, ranked.c.error_message, ranked.c.n)
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for run_id, code, message, n in await conn.execute(query.where(ranked.c.rank == 1)):
        out[run_id][code] = {"count": int(n), "first_message": message}
    return {
        run_id: dict(sorted(codes.items(), key=lambda item: -int(item[1]["count"])))
        for run_id, codes in out.items()
    }


def summary_from_parts(
    statuses: Mapping[str, int], sums: Sequence[Any] | None,
    groups: list[tuple[int, int, int]], errors: dict[str, dict[str, Any]], r: int,
) -> dict[str, Any]:  # fmt: skip
    """One run's summary from what :func:`run_summaries` queried."""
    total, rewarded, reward_sum, squares, prompt, completion, dur_sum, dur_n = sums or (
        0, 0, None, None, None, None, None, 0,
    )  # fmt: skip
    out: dict[str, Any] = {
        "rollouts": int(total),
        "statuses": dict(sorted(statuses.items())),
        "reward": reward_stats(int(rewarded), float(reward_sum or 0.0), float(squares or 0.0)),
        "tokens": {"prompt": int(prompt or 0), "completion": int(completion or 0)},
        "model_calls": None,
        "model_errors": None,
        "errors": errors,
        "latency_ms": dict(_NO_PERCENTILES),
        "ttfc_ms": dict(_NO_PERCENTILES),
        "duration_s": {"mean": float(dur_sum or 0.0) / dur_n if dur_n else None},
    }
    if r > 1:
        out["pass_at_k"] = pass_at(groups, r)
    return out


async def run_summaries(
    conn: AsyncConnection, r_of: Mapping[str, int], now: float | None = None
) -> dict[str, dict[str, Any]]:
    """The SQL summary of each run in ``r_of`` (run id → its samples per task)."""
    ids = sorted(r_of)
    if not ids:
        return {}
    now = time.time() if now is None else now
    statuses, sums = await _statuses(conn, ids, now), await _sums(conn, ids)
    groups, errors = await _pass_groups(conn, ids), await _errors(conn, ids)
    return {
        run_id: summary_from_parts(
            statuses.get(run_id, {}),
            sums.get(run_id),
            groups.get(run_id, []),
            errors.get(run_id, {}),
            r_of[run_id],
        )
        for run_id in ids
    }


def _measures() -> dict[str, ColumnElement[Any]]:
    c = sessions.c
    return {
        "reward": c.reward,
        "duration_s": c.duration_s,
        "tokens": c.prompt_tokens + c.completion_tokens,
    }


async def histograms(
    conn: AsyncConnection, run_id: str, bins: int = HISTOGRAM_BINS
) -> dict[str, dict[str, Any]]:
    """Rewards, durations and tokens per rollout of a run, each in ``bins`` equal bins
    between its least and greatest value: ``{"reward": {"lo", "hi", "counts"}, …}``."""
    measures = _measures()
    where = sessions.c.run_id == run_id
    bounds_query = select(*(f(m) for m in measures.values() for f in (func.min, func.max))).where(
        where
    )
    bounds = (await conn.execute(bounds_query)).one()
    columns: list[ColumnElement[Any]] = []
    shape: list[tuple[str, float, float, int]] = []
    for i, (name, measure) in enumerate(measures.items()):
        lo, hi = bounds[2 * i], bounds[2 * i + 1]
        if lo is None or hi is None:
            continue
        lo, hi = float(lo), float(hi)
        count = bins if hi > lo else 1
        width = (hi - lo) / count if hi > lo else 1.0
        for b in range(count):
            upper = measure <= hi if b == count - 1 else measure < lo + (b + 1) * width
            inside = and_(measure >= lo + b * width, upper)
            columns.append(func.sum(case((inside, 1), else_=0)))
        shape.append((name, lo, hi, count))
    if not columns:
        return {}
    row = (await conn.execute(select(*columns).where(where))).one()
    out: dict[str, dict[str, Any]] = {}
    at = 0
    for name, lo, hi, count in shape:
        out[name] = {"lo": lo, "hi": hi, "counts": [int(v or 0) for v in row[at : at + count]]}
        at += count
    return out
