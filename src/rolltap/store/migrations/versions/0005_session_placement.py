"""Sessions' placement: the node and the worker that ran each one (``node_id``,
``worker_id``), nullable: sessions stored before this, and those run in one process
that names no node, have none.

Both are plain nullable columns, so every backend adds them in place (SQLite's
``ALTER TABLE ADD COLUMN`` included) and older rows read as NULL without a backfill.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# as rolltap.store.schema declares them (not imported: a migration stays as it was written)
_NODE_ID = 128
_WORKER_ID = 64


def upgrade() -> None:
    op.add_column("rolltap_sessions", sa.Column("node_id", sa.String(_NODE_ID), nullable=True))
    op.add_column("rolltap_sessions", sa.Column("worker_id", sa.String(_WORKER_ID), nullable=True))


def downgrade() -> None:
    op.drop_column("rolltap_sessions", "worker_id")
    op.drop_column("rolltap_sessions", "node_id")
