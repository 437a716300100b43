"""Runs, sessions and events.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_MYSQL = ("mysql", "mariadb")
_BLOB = sa.LargeBinary().with_variant(mysql.LONGBLOB(), *_MYSQL)
_DOC = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
_OPTS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    _create_runs()
    _create_sessions()
    _create_events()


def _create_runs() -> None:
    op.create_table(
        "rolltap_runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("config", _DOC, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("n_sessions", sa.Integer(), nullable=False),
        sa.Column("n_finished", sa.Integer(), nullable=False),
        sa.Column("n_failed", sa.Integer(), nullable=False),
        sa.Column("n_rewarded", sa.Integer(), nullable=False),
        sa.Column("reward_sum", sa.Double(), nullable=False),
        **_OPTS,
    )
    op.create_index("ix_rolltap_runs_created", "rolltap_runs", ["created_at"])
    op.create_index("ix_rolltap_runs_name", "rolltap_runs", ["name"])


def _create_sessions() -> None:
    op.create_table(
        "rolltap_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("rolltap_runs.id"), nullable=False),
        sa.Column("user_name", sa.String(255), nullable=True),
        sa.Column("task", _DOC, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("n_events", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Double(), nullable=True),
        sa.Column("parent_id", sa.String(64), sa.ForeignKey("rolltap_sessions.id"), nullable=True),
        sa.Column("fork_at", sa.Integer(), nullable=True),
        sa.Column("last_commit", sa.String(32), nullable=True),
        **_OPTS,
    )
    op.create_index(
        "ix_rolltap_sessions_run_status_reward", "rolltap_sessions", ["run_id", "status", "reward"]
    )
    op.create_index("ix_rolltap_sessions_run_created", "rolltap_sessions", ["run_id", "created_at"])
    op.create_index("ix_rolltap_sessions_parent", "rolltap_sessions", ["parent_id"])


def _create_events() -> None:
    op.create_table(
        "rolltap_events",
        sa.Column(
            "session_id", sa.String(64), sa.ForeignKey("rolltap_sessions.id"), nullable=False
        ),
        sa.Column("seq", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("ts", sa.Double(), nullable=False),
        sa.Column("payload", _BLOB, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq"),
        **_OPTS,
    )


def downgrade() -> None:
    op.drop_table("rolltap_events")
    op.drop_table("rolltap_sessions")
    op.drop_table("rolltap_runs")
