"""Sessions' task, error code, tokens and duration as indexed columns; runs' stored summary.

Older sessions are backfilled from their events (a fork's inherited prefix included),
with the rule every commit applies (``rolltap.store.session_columns``).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection

from rolltap.events import Event
from rolltap.store.session_columns import SessionMetrics, duration_of, task_id_of

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_DOC = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
_SORTED = ("task_id", "error_code", "reward", "prompt_tokens", "completion_tokens", "duration_s")
_CHUNK = 500
_SESSIONS = sa.table(
    "rolltap_sessions",
    sa.column("id"), sa.column("task"), sa.column("status"), sa.column("parent_id"),
    sa.column("fork_at"), sa.column("n_events"),
)  # fmt: skip
_EVENTS = sa.table(
    "rolltap_events", sa.column("session_id"), sa.column("seq"), sa.column("kind"),
    sa.column("ts"), sa.column("payload"),
)  # fmt: skip


def upgrade() -> None:
    op.add_column("rolltap_sessions", sa.Column("task_id", sa.String(255), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("error_code", sa.String(64), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("error_message", sa.Text(), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("prompt_tokens", sa.Integer(), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("completion_tokens", sa.Integer(), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("duration_s", sa.Double(), nullable=True))
    op.add_column("rolltap_runs", sa.Column("summary", _DOC, nullable=True))
    for col in _SORTED:
        op.create_index(f"ix_rolltap_sessions_run_{col}", "rolltap_sessions", ["run_id", col])
    _backfill(op.get_bind())


def downgrade() -> None:
    for col in _SORTED:
        op.drop_index(f"ix_rolltap_sessions_run_{col}", "rolltap_sessions")
    op.drop_column("rolltap_runs", "summary")
    for col in ("duration_s", "completion_tokens", "prompt_tokens", "error_message",
                "error_code", "task_id"):  # fmt: skip
        op.drop_column("rolltap_sessions", col)


def _session_chunks(conn: Connection) -> Iterator[list[sa.Row[Any]]]:
    after = ""
    while True:
        query = (
            sa.select(_SESSIONS).where(_SESSIONS.c.id > after)
            .order_by(_SESSIONS.c.id).limit(_CHUNK)
        )  # fmt: skip
        rows = list(conn.execute(query))
        if not rows:
            return
        yield rows
        after = rows[-1].id


def _events(conn: Connection, owner: str, start: int, end: int) -> list[Event]:
    query = (
        sa.select(_EVENTS.c.seq, _EVENTS.c.kind, _EVENTS.c.ts, _EVENTS.c.payload)
        .where(_EVENTS.c.session_id == owner, _EVENTS.c.seq >= start, _EVENTS.c.seq < end)
        .order_by(_EVENTS.c.seq)
    )
    return [Event(s, k, t, orjson.loads(p)) for s, k, t, p in conn.execute(query)]


def _history(conn: Connection, row: sa.Row[Any]) -> list[Event]:
    """A fork's whole history: its parents' rows below each fork point, then its own."""
    parts: list[list[Event]] = []
    current, end = row, row.n_events
    while True:
        base = current.fork_at if current.parent_id is not None and current.fork_at else 0
        parts.append(_events(conn, current.id, base, end))
        if current.parent_id is None or base == 0:
            break
        end = min(end, base)
        parent = sa.select(_SESSIONS).where(_SESSIONS.c.id == current.parent_id)
        current = conn.execute(parent).one()
    return [event for part in reversed(parts) for event in part]


def _histories(conn: Connection, rows: list[sa.Row[Any]]) -> dict[str, list[Event]]:
    """Each session's history: those without a parent in one query, forks one by one."""
    plain = [row.id for row in rows if row.parent_id is None]
    found: dict[str, list[Event]] = defaultdict(list)
    if plain:
        query = (
            sa.select(_EVENTS.c.session_id, _EVENTS.c.seq, _EVENTS.c.kind, _EVENTS.c.ts,
                      _EVENTS.c.payload)
            .where(_EVENTS.c.session_id.in_(plain))
            .order_by(_EVENTS.c.session_id, _EVENTS.c.seq)
        )  # fmt: skip
        for sid, seq, kind, ts, payload in conn.execute(query):
            found[sid].append(Event(seq, kind, ts, orjson.loads(payload)))
    for row in rows:
        if row.parent_id is not None:
            found[row.id] = _history(conn, row)
    return found


_DERIVED = sa.table(
    "rolltap_sessions", sa.column("id"), sa.column("task_id"), sa.column("error_code"),
    sa.column("error_message"), sa.column("prompt_tokens"), sa.column("completion_tokens"),
    sa.column("duration_s"),
)  # fmt: skip
_UPDATE = (
    sa.update(_DERIVED)
    .where(_DERIVED.c.id == sa.bindparam("b_id"))
    .values(
        task_id=sa.bindparam("b_task_id"),
        error_code=sa.bindparam("b_error_code"),
        error_message=sa.bindparam("b_error_message"),
        prompt_tokens=sa.bindparam("b_prompt_tokens"),
        completion_tokens=sa.bindparam("b_completion_tokens"),
        duration_s=sa.bindparam("b_duration_s"),
    )
)


def _backfill(conn: Connection) -> None:
    for rows in _session_chunks(conn):
        histories = _histories(conn, rows)
        params = []
        for row in rows:
            history = histories.get(row.id, [])
            first, last = (history[0], history[-1]) if history else (None, None)
            derived = SessionMetrics.of(history).columns(row.status, duration_of(first, last))
            task = orjson.loads(row.task)
            params.append({
                "b_id": row.id,
                "b_task_id": task_id_of(task) if isinstance(task, dict) else None,
                **{f"b_{name}": value for name, value in derived.items()},
            })  # fmt: skip
        conn.execute(_UPDATE, params)
