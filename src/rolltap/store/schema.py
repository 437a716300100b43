"""The SQL schema: runs, sessions and their events (SQLAlchemy Core, three backends).

Payloads are orjson bytes in a BLOB column (LONGBLOB on MySQL, so 1 MiB payloads fit);
JSON documents of runs and sessions are text (LONGTEXT on MySQL). Timestamps are epoch
seconds as DOUBLE. The migrations in ``rolltap/store/migrations`` create exactly this.

>>> sorted(metadata.tables)  # doctest: +NORMALIZE_WHITESPACE
['rolltap_eval_sets', 'rolltap_events', 'rolltap_leases', 'rolltap_run_stats', 'rolltap_runs',
 'rolltap_scores', 'rolltap_scorings', 'rolltap_sessions', 'rolltap_task_stats']
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)
from sqlalchemy.dialects import mysql

from rolltap.events import ID_LENGTH

__all__ = [
    "NODE_ID_LENGTH",
    "SORTED_COLUMNS",
    "VERSION_TABLE",
    "WORKER_ID_LENGTH",
    "eval_sets",
    "events",
    "leases",
    "metadata",
    "run_stats",
    "runs",
    "scores",
    "scorings",
    "sessions",
    "task_stats",
]

#: the longest run or session id
#: the longest node id and worker id a session records (its placement)
NODE_ID_LENGTH = 128
WORKER_ID_LENGTH = 64
#: Alembic's version table, named so it cannot clash with a user's own migrations
VERSION_TABLE = "rolltap_alembic_version"

_MYSQL = ("mysql", "mariadb")
BLOB = LargeBinary().with_variant(mysql.LONGBLOB(), *_MYSQL)
DOC = Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

metadata = MetaData()

#: session columns indexed together with ``run_id``: a run's sessions sort and filter on them
SORTED_COLUMNS = (
    "task_id", "error_code", "reward", "prompt_tokens", "completion_tokens", "duration_s",
)  # fmt: skip

runs = Table(
    "rolltap_runs",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("name", String(255), nullable=True),
    Column("config", DOC, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("n_sessions", Integer, nullable=False),
    Column("n_finished", Integer, nullable=False),
    Column("n_failed", Integer, nullable=False),
    Column("n_rewarded", Integer, nullable=False),
    Column("reward_sum", Double, nullable=False),
    #: the run's summary (JSON) as its owner wrote it after the final commit; cleared by
    #: any later commit that changes the run's counters, so it is never stale
    Column("summary", DOC, nullable=True),
    #: the eval set the run belongs to (``rolltap eval-set``; no foreign key: added in place)
    Column("set_id", String(ID_LENGTH), nullable=True),
    Index("ix_rolltap_runs_created", "created_at"),
    Index("ix_rolltap_runs_set", "set_id"),
    Index("ix_rolltap_runs_name", "name"),
    **TABLE_OPTIONS,
)

sessions = Table(
    "rolltap_sessions",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("run_id", String(ID_LENGTH), ForeignKey("rolltap_runs.id"), nullable=False),
    Column("user_name", String(255), nullable=True),
    Column("task", DOC, nullable=False),
    Column("status", String(32), nullable=False),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    Column("n_events", Integer, nullable=False),
    Column("reward", Double, nullable=True),
    Column("parent_id", String(ID_LENGTH), ForeignKey("rolltap_sessions.id"), nullable=True),
    Column("fork_at", Integer, nullable=True),
    Column("last_commit", String(32), nullable=True),
    # derived from the history by every commit (see rolltap.store.session_columns), so a run's
    # sessions page, sort, filter and aggregate in SQL without reading events
    Column("task_id", String(255), nullable=True),
    Column("error_code", String(64), nullable=True),
    Column("error_message", Text, nullable=True),
    Column("prompt_tokens", Integer, nullable=True),
    Column("completion_tokens", Integer, nullable=True),
    Column("duration_s", Double, nullable=True),
    # where it ran, as its owner said at creation (None: not said, or stored before 0005)
    Column("node_id", String(NODE_ID_LENGTH), nullable=True),
    Column("worker_id", String(WORKER_ID_LENGTH), nullable=True),
    # ``rolltap eval --retry-failed``: a failed rollout run again is a new session of the same
    # run, ``attempt`` one more than the session it repeats, ``retry_of`` (NULL: attempt 0,
    # nothing repeated; no foreign key: a resume may delete the attempt it names)
    Column("attempt", Integer, nullable=True),
    Column("retry_of", String(ID_LENGTH), nullable=True),
    Index("ix_rolltap_sessions_retry_of", "retry_of"),
    Index("ix_rolltap_sessions_run_status_reward", "run_id", "status", "reward"),
    Index("ix_rolltap_sessions_run_created", "run_id", "created_at"),
    Index("ix_rolltap_sessions_parent", "parent_id"),
    *(Index(f"ix_rolltap_sessions_run_{col}", "run_id", col) for col in SORTED_COLUMNS),
    **TABLE_OPTIONS,
)

events = Table(
    "rolltap_events",
    metadata,
    Column("session_id", String(ID_LENGTH), ForeignKey("rolltap_sessions.id"), nullable=False),
    Column("seq", Integer, nullable=False, autoincrement=False),
    Column("kind", String(32), nullable=False),
    Column("ts", Double, nullable=False),
    Column("payload", BLOB, nullable=False),
    PrimaryKeyConstraint("session_id", "seq"),
    **TABLE_OPTIONS,
)

#: the owner of a run: whoever renews ``expires_at`` in time; ``epoch`` grows by one
#: each time a new owner takes the run over, and fences the commits of older ones
leases = Table(
    "rolltap_leases",
    metadata,
    Column("run_id", String(ID_LENGTH), ForeignKey("rolltap_runs.id"), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("ttl_s", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    Column("token", String(32), nullable=False),
    **TABLE_OPTIONS,
)

#: a run's aggregates, kept by every write in the same transaction (rolltap.store.rollup):
#: ``stat`` names what is counted (``status``, ``error``, ``reward``, ``tokens``, histogram
#: bins, pass@k groups), ``key`` which one; ``n`` counts, ``total`` sums; ``message`` and
#: ``first_at``: an error code's earliest session's message and creation time
run_stats = Table(
    "rolltap_run_stats",
    metadata,
    Column("run_id", String(ID_LENGTH), ForeignKey("rolltap_runs.id"), nullable=False),
    Column("stat", String(16), nullable=False),
    Column("key", String(64), nullable=False),
    Column("n", Integer, nullable=False),
    Column("total", Double, nullable=False),
    Column("message", Text, nullable=True),
    Column("first_at", Double, nullable=True),
    PrimaryKeyConstraint("run_id", "stat", "key"),
    **TABLE_OPTIONS,
)

#: a run's tasks (``task_key`` "" for sessions whose task names no id), kept like run_stats
task_stats = Table(
    "rolltap_task_stats",
    metadata,
    Column("run_id", String(ID_LENGTH), ForeignKey("rolltap_runs.id"), nullable=False),
    Column("task_key", String(255), nullable=False),
    Column("rollouts", Integer, nullable=False),
    Column("rewarded", Integer, nullable=False),
    Column("passed", Integer, nullable=False),
    Column("reward_sum", Double, nullable=False),
    PrimaryKeyConstraint("run_id", "task_key"),
    **TABLE_OPTIONS,
)

#: a run scored again after the fact (``rolltap score``): its reward specs (JSON list of
#: ``{"name", "weight"}``) and, once every score is written, its summary (JSON)
scorings = Table(
    "rolltap_scorings",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("run_id", String(ID_LENGTH), ForeignKey("rolltap_runs.id"), nullable=False),
    Column("name", String(255), nullable=True),
    Column("rewards", DOC, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("summary", DOC, nullable=True),
    Index("ix_rolltap_scorings_run_created", "run_id", "created_at"),
    **TABLE_OPTIONS,
)

#: one session's reward under a scoring: ``reward`` and its ``components`` (JSON), or the
#: reward function's failure (``error_code`` ``reward_error``, ``reward`` NULL)
scores = Table(
    "rolltap_scores",
    metadata,
    Column("scoring_id", String(ID_LENGTH), ForeignKey("rolltap_scorings.id"), nullable=False),
    Column("session_id", String(ID_LENGTH), ForeignKey("rolltap_sessions.id"), nullable=False),
    Column("reward", Double, nullable=True),
    Column("components", DOC, nullable=True),
    Column("error_code", String(64), nullable=True),
    Column("error_message", Text, nullable=True),
    PrimaryKeyConstraint("scoring_id", "session_id"),
    Index("ix_rolltap_scores_session", "session_id"),
    **TABLE_OPTIONS,
)

#: the runs of one ``rolltap eval-set`` (``rolltap_runs.set_id``): the set file as given (JSON)
eval_sets = Table(
    "rolltap_eval_sets",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("name", String(255), nullable=True),
    Column("config", DOC, nullable=False),
    Column("created_at", Double, nullable=False),
    **TABLE_OPTIONS,
)
