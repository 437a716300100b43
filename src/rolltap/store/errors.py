"""Store-specific errors: every one is a :class:`rolltap.errors.StoreError`.

>>> from rolltap.errors import StoreError
>>> issubclass(ForkDependencyError, StoreError)
True
"""

from __future__ import annotations

from rolltap.errors import StoreError

__all__ = [
    "ForkDependencyError",
    "SchemaVersionError",
    "StoreClosedError",
    "StoreConflictError",
    "StoreFencedError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "StoreValidationError",
]


class StoreValidationError(StoreError):
    """An argument is invalid: an unknown status, an over-long id, an unserializable payload."""

    code = "store_invalid_argument"
    status = 400
    type = "invalid_request_error"


class StoreNotFoundError(StoreError):
    """The run, session or store file does not exist."""

    code = "store_not_found"
    status = 404
    type = "not_found_error"


class StoreConflictError(StoreError):
    """The write conflicts with what is stored (e.g. a session id that already exists)."""

    code = "store_conflict"
    status = 409
    type = "invalid_request_error"


class StoreFencedError(StoreConflictError):
    """A write of a run owner that lost its lease: a newer owner (a higher epoch) took over."""

    code = "store_fenced"


class ForkDependencyError(StoreConflictError):
    """Forks depend on events this operation would delete or rewrite."""

    code = "store_fork_dependency"


class SchemaVersionError(StoreError):
    """The database schema is not at the version this rolltap needs."""

    code = "store_schema_outdated"
    status = 503


class StoreUnavailableError(StoreError):
    """The database stayed unreachable past the reconnect deadline
    (``--store-unavailable-timeout``, default 300 s). ``rolltap serve`` refuses a batch
    with it (``Retry-After: 5``) while its store is unreachable or holds more than
    ``ROLLTAP_STORE_PENDING_MAX_BYTES`` of pending writes; what is in flight goes on."""

    code = "store_unavailable"
    status = 503
    retryable = True


class StoreClosedError(StoreError):
    """The store was closed before the write could be made."""

    code = "store_closed"
    status = 503


class StoreFullError(StoreError):
    """The database or the disk it lives on is full: the write cannot be made.
    ``rolltap serve`` refuses batches for 30 s after (``Retry-After: 30``).

    Not retryable by waiting alone: free space (or raise the server's quota) first.
    Nothing already stored is damaged — the failed transaction is rolled back whole.
    """

    code = "store_full"
    status = 507
