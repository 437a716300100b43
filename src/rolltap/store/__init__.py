"""The SQL persistence of rollouts' event logs (the model itself: :mod:`rolltap.events`).

This module is the store's one door: the rest of rolltap imports only what it names
(``lint-imports``' "store" contracts). Exports of what is stored (JSONL, ``hf``, token
sequences, transcripts) live in :mod:`rolltap.exports` and read through the read API
here: :func:`reading` a pooled connection, then :func:`fetch_run`,
:func:`fetch_session`, :func:`list_sessions`, :func:`iter_event_rows`, and the viewer's
pages (:func:`runs_page`, :func:`sessions_page`, :func:`tasks_page`, :func:`task_rows`).

>>> from rolltap.events import EventLog
>>> async def keep(url: str, log: EventLog) -> None:
...     async with await Store.open(url) as store:
...         run = await store.create_run("nightly")
...         session = await store.create_session(run.id, user="ana")
...         await store.commit(session.id, log, status="completed", reward=1.0)
"""

from rolltap.store.aggregate import run_r, summary_of_run
from rolltap.store.attempt_read import retried_by, run_policy
from rolltap.store.browse import (
    SESSION_SORTS,
    RunRow,
    SessionFilter,
    SessionRow,
    TaskRow,
    runs_page,
    sessions_page,
    task_rows,
    tasks_page,
)
from rolltap.store.errors import (
    ForkDependencyError,
    SchemaVersionError,
    StoreClosedError,
    StoreConflictError,
    StoreFencedError,
    StoreFullError,
    StoreNotFoundError,
    StoreUnavailableError,
    StoreValidationError,
)
from rolltap.store.eval_sets import EvalSetInfo
from rolltap.store.lease import LeaseInfo
from rolltap.store.leasing import DEFAULT_LEASE_TTL_S, LeaseKeeper
from rolltap.store.migrate import upgrade
from rolltap.store.models import (
    CommitResult,
    RunInfo,
    SessionInfo,
    check_attempt,
    check_id,
    check_placement,
    check_status,
)
from rolltap.store.reader import (
    EventRow,
    fetch_run,
    fetch_session,
    iter_event_rows,
    list_sessions,
    reading,
)
from rolltap.store.rollup_read import reward_histogram
from rolltap.store.scoring_ops import Score, ScoringInfo
from rolltap.store.scorings import ORIGINAL as ORIGINAL_SCORING
from rolltap.store.scorings import pick_scoring
from rolltap.store.serialize import event_json, event_rows, row_event
from rolltap.store.store import Store
from rolltap.store.url import DEFAULT_STORE_URL, STORE_ENV, mask_url, resolve_store_url
from rolltap.store.writer import InjectedFault, WriterHooks, WriterStats
from rolltap.store.writer_state import DEFAULT_UNAVAILABLE_TIMEOUT_S

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_STORE_URL",
    "DEFAULT_UNAVAILABLE_TIMEOUT_S",
    "ORIGINAL_SCORING",
    "SESSION_SORTS",
    "STORE_ENV",
    "CommitResult",
    "EvalSetInfo",
    "EventRow",
    "ForkDependencyError",
    "InjectedFault",
    "LeaseInfo",
    "LeaseKeeper",
    "RunInfo",
    "RunRow",
    "SchemaVersionError",
    "Score",
    "ScoringInfo",
    "SessionFilter",
    "SessionInfo",
    "SessionRow",
    "Store",
    "StoreClosedError",
    "StoreConflictError",
    "StoreFencedError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "StoreValidationError",
    "TaskRow",
    "WriterHooks",
    "WriterStats",
    "check_attempt",
    "check_id",
    "check_placement",
    "check_status",
    "event_json",
    "event_rows",
    "fetch_run",
    "fetch_session",
    "iter_event_rows",
    "list_sessions",
    "mask_url",
    "pick_scoring",
    "reading",
    "resolve_store_url",
    "retried_by",
    "reward_histogram",
    "row_event",
    "run_policy",
    "run_r",
    "runs_page",
    "sessions_page",
    "summary_of_run",
    "task_rows",
    "tasks_page",
    "upgrade",
]
