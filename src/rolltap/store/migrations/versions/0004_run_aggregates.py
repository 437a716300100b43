"""Per-run and per-task aggregates (rolltap_run_stats, rolltap_task_stats), kept by every
write from now on; backfilled here from the sessions' columns, run by run, with the rule
every write applies (``rolltap.store.rollup``).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from rolltap.store.rollup import Rollup

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_ID = 64
_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}
_SESSIONS = sa.table(
    "rolltap_sessions",
    *(sa.column(c) for c in (
        "id", "run_id", "task_id", "status", "created_at", "reward", "error_code",
        "error_message", "prompt_tokens", "completion_tokens", "duration_s",
    )),
)  # fmt: skip
_RUNS = sa.table("rolltap_runs", sa.column("id"))


def upgrade() -> None:
    run_stats = op.create_table(
        "rolltap_run_stats",
        sa.Column("run_id", sa.String(_ID), sa.ForeignKey("rolltap_runs.id"), nullable=False),
        sa.Column("stat", sa.String(16), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("total", sa.Double(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("first_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "stat", "key"),
        **_OPTIONS,
    )
    task_stats = op.create_table(
        "rolltap_task_stats",
        sa.Column("run_id", sa.String(_ID), sa.ForeignKey("rolltap_runs.id"), nullable=False),
        sa.Column("task_key", sa.String(255), nullable=False),
        sa.Column("rollouts", sa.Integer(), nullable=False),
        sa.Column("rewarded", sa.Integer(), nullable=False),
        sa.Column("passed", sa.Integer(), nullable=False),
        sa.Column("reward_sum", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "task_key"),
        **_OPTIONS,
    )
    assert run_stats is not None
    assert task_stats is not None
    conn = op.get_bind()
    for run_id in list(conn.scalars(sa.select(_RUNS.c.id).order_by(_RUNS.c.id))):
        query = sa.select(_SESSIONS).where(_SESSIONS.c.run_id == run_id)
        rollup = Rollup.of_rows(conn.execute(query).mappings())
        stats, tasks = rollup.stat_rows(), rollup.task_rows()
        if stats:
            conn.execute(run_stats.insert(), stats)
        if tasks:
            conn.execute(task_stats.insert(), tasks)


def downgrade() -> None:
    op.drop_table("rolltap_task_stats")
    op.drop_table("rolltap_run_stats")
