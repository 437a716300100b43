"""Events, the in-memory event log, and their SQL persistence.

>>> async def keep(url: str, log: EventLog) -> None:
...     async with await Store.open(url) as store:
...         run = await store.create_run("nightly")
...         session = await store.create_session(run.id, user="ana")
...         await store.commit(session.id, log, status="completed", reward=1.0)
"""

from rolltap.events import FORMAT_VERSION, Event, EventKind, EventLog, LogSnapshot
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
from rolltap.store.lease import LeaseInfo
from rolltap.store.leasing import DEFAULT_LEASE_TTL_S, LeaseKeeper
from rolltap.store.migrate import upgrade
from rolltap.store.models import CommitResult, RunInfo, SessionInfo
from rolltap.store.store import Store
from rolltap.store.url import DEFAULT_STORE_URL, STORE_ENV, mask_url, resolve_store_url
from rolltap.store.writer import InjectedFault, WriterHooks, WriterStats

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_STORE_URL",
    "FORMAT_VERSION",
    "STORE_ENV",
    "CommitResult",
    "Event",
    "EventKind",
    "EventLog",
    "ForkDependencyError",
    "InjectedFault",
    "LeaseInfo",
    "LeaseKeeper",
    "LogSnapshot",
    "RunInfo",
    "SchemaVersionError",
    "SessionInfo",
    "Store",
    "StoreClosedError",
    "StoreConflictError",
    "StoreFencedError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "StoreValidationError",
    "WriterHooks",
    "WriterStats",
    "mask_url",
    "resolve_store_url",
    "upgrade",
]
