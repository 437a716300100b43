"""What a session's history says about it: tokens, duration, and why it failed.

Every commit keeps these in the session's row (``task_id``, ``error_code``,
``error_message``, ``prompt_tokens``, ``completion_tokens``, ``duration_s``), so a run's
sessions page, sort, filter and aggregate in SQL without reading their events. The
rule for a failure's code is the one ``rolltap eval`` reports:

>>> m = SessionMetrics()
>>> m.add([Event(0, "model_error", 1.0, {"code": "upstream_timeout", "message": "slow"})])
>>> m.failure("failed"), m.failure("completed")
(('upstream_timeout', 'slow'), None)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rolltap.events import Event, EventKind
from rolltap.store.models import FAILED_STATUSES

__all__ = ["HARNESS_ERROR", "SessionMetrics", "duration_of", "task_id_of"]

#: the error code of a failed rollout whose model calls did not fail
HARNESS_ERROR = "harness_error"
_CODE_LENGTH = 64
_TASK_ID_LENGTH = 255


def _number(value: Any) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return 0


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(slots=True)
class SessionMetrics:
    """Running totals over a session's events, extended by each commit's new events."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: (code, message) of the last ``model_error``
    model_error: tuple[str, str | None] | None = None
    #: the last ``status`` event's ``error`` text, and the code its owner named
    status_error: str | None = None
    status_code: str | None = None
    status_message: str | None = None

    @classmethod
    def of(cls, events: Iterable[Event]) -> SessionMetrics:
        metrics = cls()
        metrics.add(events)
        return metrics

    def add(self, events: Iterable[Event]) -> None:
        """Count ``events`` (those past what was already counted)."""
        for event in events:
            payload = event.payload
            if event.kind == EventKind.MODEL_RESPONSE:
                usage = payload.get("usage")
                if isinstance(usage, Mapping):
                    self.prompt_tokens += _number(usage.get("prompt_tokens"))
                    self.completion_tokens += _number(usage.get("completion_tokens"))
            elif event.kind == EventKind.MODEL_ERROR:
                code = payload.get("code") or "model_error"
                self.model_error = (str(code), _text(payload.get("message")))
            elif event.kind == EventKind.STATUS:
                self.status_error = _text(payload.get("error"))
                self.status_code = _text(payload.get("error_code"))
                self.status_message = _text(payload.get("error_message"))

    def failure(self, status: str) -> tuple[str, str] | None:
        """``(code, message)`` of a session that ended in a failed status, else ``None``.

        The code its owner stored in the status event (``error_code``, with
        ``error_message``) first; else the
        last ``model_error``'s code and message; else :data:`HARNESS_ERROR` (the model
        calls answered, the harness failed) with the status event's ``error``.
        """
        if status not in FAILED_STATUSES:
            return None
        if self.status_code is not None:
            return self.status_code, self.status_message or self.status_error or status
        if self.model_error is not None:
            code, message = self.model_error
            return code, message or self.status_error or status
        return HARNESS_ERROR, self.status_error or status

    def columns(self, status: str, duration_s: float | None) -> dict[str, Any]:
        """The session row's derived columns under ``status`` (see :func:`duration_of`)."""
        failure = self.failure(status)
        return {
            "error_code": failure[0][:_CODE_LENGTH] if failure else None,
            "error_message": failure[1] if failure else None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "duration_s": duration_s,
        }


def duration_of(first: Event | None, last: Event | None) -> float | None:
    """Seconds from a history's first event to its last; None when it has none."""
    if first is None or last is None:
        return None
    return max(0.0, last.ts - first.ts)


def task_id_of(task: Mapping[str, Any]) -> str | None:
    """The task id a session's task document names (``task_id``, else ``id``)."""
    value = task.get("task_id", task.get("id"))
    if value is None or isinstance(value, Mapping | list):
        return None
    return str(value)[:_TASK_ID_LENGTH]
