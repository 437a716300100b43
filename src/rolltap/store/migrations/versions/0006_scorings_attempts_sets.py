"""Evaluations without new inference: scorings of a run, attempts of a rollout, eval sets.

* ``rolltap_scorings`` / ``rolltap_scores``: a *scoring* is one set of reward functions
  applied to a stored run's rollouts after the fact (``rolltap score``); a score is one
  session's reward (or reward error) under it. The rewards ``rolltap eval`` computed stay
  in ``rolltap_sessions.reward``: a scoring never overwrites them.
* ``rolltap_sessions.attempt`` / ``retry_of``: ``rolltap eval --retry-failed`` runs a
  failed rollout again as a new session of the same run, its ``attempt`` one more than
  the one it repeats, whose id is ``retry_of`` (no foreign key: a ``--resume`` may delete
  the attempt it names). NULL reads as attempt 0 with nothing repeated.
* ``rolltap_eval_sets`` / ``rolltap_runs.set_id``: the runs of one ``rolltap eval-set``.

Every new column is nullable, so every backend (SQLite's ``ALTER TABLE ADD COLUMN``
included) adds it in place and older rows need no backfill.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# as rolltap.store.schema declares them (not imported: a migration stays as it was written)
_ID = 64
_MYSQL = ("mysql", "mariadb")
_DOC = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    op.create_table(
        "rolltap_scorings",
        sa.Column("id", sa.String(_ID), primary_key=True),
        sa.Column("run_id", sa.String(_ID), sa.ForeignKey("rolltap_runs.id"), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("rewards", _DOC, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("summary", _DOC, nullable=True),
        **_OPTIONS,
    )
    op.create_index("ix_rolltap_scorings_run_created", "rolltap_scorings", ["run_id", "created_at"])
    op.create_table(
        "rolltap_scores",
        sa.Column(
            "scoring_id", sa.String(_ID), sa.ForeignKey("rolltap_scorings.id"), nullable=False
        ),
        sa.Column(
            "session_id", sa.String(_ID), sa.ForeignKey("rolltap_sessions.id"), nullable=False
        ),
        sa.Column("reward", sa.Double(), nullable=True),
        sa.Column("components", _DOC, nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("scoring_id", "session_id"),
        **_OPTIONS,
    )
    op.create_index("ix_rolltap_scores_session", "rolltap_scores", ["session_id"])
    op.add_column("rolltap_sessions", sa.Column("attempt", sa.Integer(), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("retry_of", sa.String(_ID), nullable=True))
    op.create_index("ix_rolltap_sessions_retry_of", "rolltap_sessions", ["retry_of"])
    op.create_table(
        "rolltap_eval_sets",
        sa.Column("id", sa.String(_ID), primary_key=True),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("config", _DOC, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        **_OPTIONS,
    )
    op.add_column("rolltap_runs", sa.Column("set_id", sa.String(_ID), nullable=True))
    op.create_index("ix_rolltap_runs_set", "rolltap_runs", ["set_id"])


def downgrade() -> None:
    op.drop_index("ix_rolltap_runs_set", table_name="rolltap_runs")
    op.drop_column("rolltap_runs", "set_id")
    op.drop_table("rolltap_eval_sets")
    op.drop_index("ix_rolltap_sessions_retry_of", table_name="rolltap_sessions")
    op.drop_column("rolltap_sessions", "retry_of")
    op.drop_column("rolltap_sessions", "attempt")
    op.drop_table("rolltap_scores")  # its indexes go with it (MySQL refuses to drop an
    op.drop_table("rolltap_scorings")  # index a foreign key needs first)
