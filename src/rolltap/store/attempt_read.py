"""A run with attempts read back: its sessions as results, and its summary per slot.

Rollups count every session, so once ``rolltap eval --retry-failed`` added attempts they
cannot say the run's summary of one attempt per (task, sample) slot
(:mod:`rolltap.results.attempts`). A run that was retried says so in its config
(``retries``, written by :class:`~rolltap.store.summary_ops.RecordRetryOp`, with its
``run.attempt_policy``): only such a run's summary is made from its sessions' rows; every
other run's still comes from its aggregates, so reading it costs what it did.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.results.attempts import ATTEMPT_POLICIES, AttemptPolicy, attempt_summary
from rolltap.results.rollout import CallStats, RolloutResult
from rolltap.store.lease import effective_status
from rolltap.store.schema import leases, sessions
from rolltap.store.serialize import load_doc

__all__ = ["retried", "retried_by", "run_policy", "session_results", "slot_summary"]


def retried(config: Mapping[str, Any]) -> bool:
    """Whether a run (by its stored config) had a retry pass: its sessions hold attempts
    (what :attr:`~rolltap.store.RunInfo.retries` counts)."""
    passes = config.get("retries")
    return isinstance(passes, list) and bool(passes)


def run_policy(config: Mapping[str, Any]) -> AttemptPolicy:
    """The attempt policy a run is summarized by (its ``run.attempt_policy``; ``best``)."""
    run = config.get("run")
    policy = run.get("attempt_policy") if isinstance(run, Mapping) else None
    for known in ATTEMPT_POLICIES:
        if policy == known:
            return known
    return ATTEMPT_POLICIES[0]


def _result(row: Row[Any], status: str) -> RolloutResult:
    task = load_doc(row.task)
    task_id, sample = task.get("task_id"), task.get("sample")
    if not isinstance(task_id, str) or not isinstance(sample, int):
        task_id, sample = row.id, 0  # not an eval's rollout: a slot of its own
    calls = CallStats(prompt_tokens=row.prompt_tokens or 0,
                      completion_tokens=row.completion_tokens or 0)  # fmt: skip
    return RolloutResult(
        task_id, sample, row.id, status, reward=row.reward, error_code=row.error_code,
        error_message=row.error_message, calls=calls, duration_s=row.duration_s or 0.0,
        attempt=row.attempt or 0, retry_of=row.retry_of,
    )  # fmt: skip


async def session_results(
    conn: AsyncConnection, run_id: str, now: float | None = None
) -> list[RolloutResult]:
    """Every session of ``run_id`` as a result from its row (status as readers see it;
    tokens, duration and failure from its columns; no per-call figures), oldest first."""
    now = time.time() if now is None else now
    expires_at = await conn.scalar(select(leases.c.expires_at).where(leases.c.run_id == run_id))
    c = sessions.c
    query = (
        select(c.id, c.task, c.status, c.reward, c.error_code, c.error_message,
               c.prompt_tokens, c.completion_tokens, c.duration_s, c.attempt, c.retry_of)
        .where(c.run_id == run_id)
        .order_by(c.created_at, c.id)
    )  # fmt: skip
    return [
        _result(row, effective_status(row.status, expires_at, now))
        for row in await conn.execute(query)
    ]


async def slot_summary(
    conn: AsyncConnection, run_id: str, config: Mapping[str, Any], r: int
) -> dict[str, Any]:
    """The summary of a retried run: one attempt per slot by its policy, from its rows."""
    results = await session_results(conn, run_id)
    return attempt_summary(results, r=r, policy=run_policy(config), calls_known=False)


async def retried_by(conn: AsyncConnection, session_id: str) -> list[str]:
    """The sessions that repeat ``session_id`` (its next attempts), oldest first."""
    query = (
        select(sessions.c.id)
        .where(sessions.c.retry_of == session_id)
        .order_by(sessions.c.created_at, sessions.c.id)
    )
    return list((await conn.scalars(query)).all())
