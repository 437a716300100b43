"""Writing a :class:`~rolltap.store.rollup.Rollup` inside the writer's transaction.

Deltas are added with one upsert per table (``INSERT … ON CONFLICT DO UPDATE`` on
SQLite and PostgreSQL, ``ON DUPLICATE KEY UPDATE`` on MySQL), rows in key order. The
tasks' totals are read back after their upsert, with the rows locked by it, so a
task's move between pass@k groups is right even when two processes write one run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Table, TextClause, bindparam, case, delete, select, text, tuple_
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.rollup import NO_TASK, Facts, Rollup
from rolltap.store.schema import run_stats, sessions, task_stats

__all__ = ["apply_rollup", "drop_rollups", "facts_of", "rebuild_rollups"]

_CHUNK = 500
FACT_COLUMNS = (
    sessions.c.id, sessions.c.run_id, sessions.c.task_id, sessions.c.status,
    sessions.c.created_at, sessions.c.reward, sessions.c.error_code, sessions.c.error_message,
    sessions.c.prompt_tokens, sessions.c.completion_tokens, sessions.c.duration_s,
)  # fmt: skip


async def facts_of(conn: AsyncConnection, ids: Sequence[str]) -> dict[str, Facts]:
    """The aggregated facts of sessions ``ids`` as their rows hold them (rows locked)."""
    out: dict[str, Facts] = {}
    for i in range(0, len(ids), _CHUNK):
        query = select(*FACT_COLUMNS).where(sessions.c.id.in_(ids[i : i + _CHUNK]))
        for row in (await conn.execute(query.with_for_update())).mappings():
            out[row["id"]] = Facts.of_row(row)
    return out


@functools.cache
def _upsert(name: str, table: Table, adds: tuple[str, ...], first: bool = False) -> TextClause:
    """The upsert (for dialect ``name``) adding columns ``adds`` to existing rows; with
    ``first``, an error's ``message``/``first_at`` replaced when the new one is earlier.

    Built and compiled once per shape, as a typed ``text()``: SQLAlchemy 2.0 gives the
    dialects' ``ON CONFLICT`` / ``ON DUPLICATE KEY`` inserts no cache key, so it compiled
    them again at every execution — a tenth of a ``--workers`` driver's CPU at 2,048
    rollouts (benchmarks/cpu_split.py). A ``text()`` with its binds typed is cached."""
    dialect, statement = _upsert_statement(name, table, adds, first)
    binds = [bindparam(column.name, type_=column.type) for column in table.columns]
    return text(str(statement.compile(dialect=dialect))).bindparams(*binds)


def _upsert_statement(
    name: str, table: Table, adds: tuple[str, ...], first: bool
) -> tuple[Dialect, Any]:
    """The upsert as a construct, with a dialect that compiles it with ``:named`` binds."""
    if name in ("mysql", "mariadb"):
        mstmt = mysql.insert(table)
        new: Any = mstmt.inserted
        # MySQL applies assignments left to right: message before first_at
        sets: list[tuple[str, Any]] = [(c, table.c[c] + new[c]) for c in adds]
        if first:
            sets += _first_sets(table, new)
        return mysql.dialect(paramstyle="named"), mstmt.on_duplicate_key_update(sets)
    module = postgresql if name == "postgresql" else sqlite
    stmt = module.insert(table)
    new = stmt.excluded
    values = dict(
        [(c, table.c[c] + new[c]) for c in adds] + (_first_sets(table, new) if first else [])
    )
    keys = [c.name for c in table.primary_key.columns]
    upsert = stmt.on_conflict_do_update(index_elements=keys, set_=values)
    return module.dialect(paramstyle="named"), upsert


def _first_sets(table: Table, new: Any) -> list[tuple[str, Any]]:
    earlier = (table.c.first_at.is_(None) | (new.first_at < table.c.first_at)) & (
        new.first_at.is_not(None)
    )
    return [
        ("message", case((earlier, new.message), else_=table.c.message)),
        ("first_at", case((earlier, new.first_at), else_=table.c.first_at)),
    ]


async def apply_rollup(conn: AsyncConnection, rollup: Rollup) -> None:
    """Add ``rollup``'s deltas (tasks first: their pass@k groups need the new totals)."""
    tasks = rollup.task_rows()
    if tasks:
        adds = ("rollouts", "rewarded", "passed", "reward_sum")
        await conn.execute(_upsert(conn.dialect.name, task_stats, adds), tasks)
        await _move_pass_groups(conn, rollup, tasks)
    stats = rollup.stat_rows()
    if stats:
        await conn.execute(_upsert(conn.dialect.name, run_stats, ("n", "total"), True), stats)


async def _move_pass_groups(
    conn: AsyncConnection, rollup: Rollup, tasks: list[dict[str, Any]]
) -> None:
    changed = {
        (t["run_id"], t["task_key"]): (t["rewarded"], t["passed"])
        for t in tasks
        if t["task_key"] != NO_TASK and (t["rewarded"] or t["passed"])
    }
    keys = list(changed)
    for i in range(0, len(keys), _CHUNK):
        part = keys[i : i + _CHUNK]
        query = select(
            task_stats.c.run_id, task_stats.c.task_key, task_stats.c.rewarded, task_stats.c.passed
        ).where(tuple_(task_stats.c.run_id, task_stats.c.task_key).in_(part))
        for run_id, key, rewarded, passed in await conn.execute(query.with_for_update()):
            d_rewarded, d_passed = changed[(run_id, key)]
            before = (int(rewarded) - d_rewarded, int(passed) - d_passed)
            rollup.move_tasks(run_id, before, (int(rewarded), int(passed)))


async def drop_rollups(conn: AsyncConnection, run_ids: Iterable[str]) -> None:
    ids = sorted(run_ids)
    for table in (run_stats, task_stats):
        await conn.execute(delete(table).where(table.c.run_id.in_(ids)))


async def rebuild_rollups(conn: AsyncConnection, run_ids: Iterable[str]) -> None:
    """Recount the aggregates of ``run_ids`` from their sessions (after deletions)."""
    ids = sorted(run_ids)
    if not ids:
        return
    await drop_rollups(conn, ids)
    for run_id in ids:
        query = select(*FACT_COLUMNS).where(sessions.c.run_id == run_id)
        rollup = Rollup.of_rows((await conn.execute(query)).mappings())
        stats, tasks = rollup.stat_rows(), rollup.task_rows()
        if stats:
            await conn.execute(run_stats.insert(), stats)
        if tasks:
            await conn.execute(task_stats.insert(), tasks)
