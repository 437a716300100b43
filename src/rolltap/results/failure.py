"""The one failure rule: the error code and message a failed rollout is reported under.

``rolltap eval`` reports it from the rollout in memory; the store keeps it in the
session's ``error_code`` / ``error_message`` columns from the stored events, so a run
re-read from the store reports what the eval did. In order:

1. the code the rollout's owner named in its ``status`` event (``error_code``, with
   ``error_message``): a registration, reward or store error the runner saw;
2. else the last ``model_error`` event's code (:data:`MODEL_ERROR` when it named none)
   and message;
3. else :data:`HARNESS_ERROR`: the model calls answered, the harness failed.

The message falls back to the status event's ``error`` text, then to the status.

>>> failure_of("failed", model_error=("upstream_timeout", "slow"))
('upstream_timeout', 'slow')
>>> failure_of("failed", error="RuntimeError: boom"), failure_of("completed")
(('harness_error', 'RuntimeError: boom'), None)
>>> from types import SimpleNamespace as Ev
>>> trace = FailureTrace()
>>> trace.see(Ev(kind="status", payload={"status": "error", "error_code": "reward_error"}))
>>> trace.failure("error")
('reward_error', 'error')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rolltap.results.statuses import FAILED_STATUSES, HARNESS_ERROR, MODEL_ERROR

__all__ = ["EventLike", "FailureTrace", "failure_of", "last_model_error"]

_MODEL_ERROR_KIND = "model_error"
_STATUS_KIND = "status"


class EventLike(Protocol):
    """What the rule reads of an event (``rolltap.store.Event`` is one)."""

    @property
    def kind(self) -> str: ...

    @property
    def payload(self) -> Mapping[str, Any]: ...


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def failure_of(
    status: str,
    *,
    named: tuple[str, str | None] | None = None,
    model_error: tuple[str, str | None] | None = None,
    error: str | None = None,
) -> tuple[str, str] | None:
    """``(code, message)`` of a rollout that ended in ``status``; ``None`` unless failed.

    ``named`` is the (code, message) its owner named, ``model_error`` its last model
    error's, ``error`` the status event's text (see the module docs for the order).
    """
    if status not in FAILED_STATUSES:
        return None
    if named is not None:
        return named[0], named[1] or error or status
    if model_error is not None:
        return model_error[0], model_error[1] or error or status
    return HARNESS_ERROR, error or status


def model_error_of(payload: Mapping[str, Any]) -> tuple[str, str | None]:
    """The (code, message) a ``model_error`` event's payload records."""
    return str(payload.get("code") or MODEL_ERROR), _text(payload.get("message"))


def last_model_error(events: Iterable[EventLike]) -> tuple[str, str | None] | None:
    """The (code, message) of the last ``model_error`` among ``events``, or ``None``."""
    last = None
    for event in events:
        if event.kind == _MODEL_ERROR_KIND:
            last = model_error_of(event.payload)
    return last


@dataclass(slots=True)
class FailureTrace:
    """What a stored history says about a failure, extended event by event (its fields
    immutable values: a shallow copy is a copy)."""

    #: (code, message) of the last ``model_error``
    model_error: tuple[str, str | None] | None = None
    #: the last ``status`` event's ``error`` text, and the code (and message) its owner named
    status_error: str | None = None
    status_code: str | None = None
    status_message: str | None = None

    def see(self, event: EventLike) -> None:
        """Take ``event`` into account (events come in order)."""
        if event.kind == _MODEL_ERROR_KIND:
            self.model_error = model_error_of(event.payload)
        elif event.kind == _STATUS_KIND:
            payload = event.payload
            self.status_error = _text(payload.get("error"))
            self.status_code = _text(payload.get("error_code"))
            self.status_message = _text(payload.get("error_message"))

    def failure(self, status: str) -> tuple[str, str] | None:
        """:func:`failure_of` the history seen so far, ended in ``status``."""
        named = None if self.status_code is None else (self.status_code, self.status_message)
        return failure_of(
            status, named=named, model_error=self.model_error, error=self.status_error
        )
