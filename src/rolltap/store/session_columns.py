"""A session row's derived columns: what its history says of tokens, duration, failure.

Every commit keeps these in the session's row (``task_id``, ``error_code``,
``error_message``, ``prompt_tokens``, ``completion_tokens``, ``duration_s``), so a run's
sessions page, sort, filter and aggregate in SQL without reading their events. The
failure's code is the one rule ``rolltap eval`` reports by (:mod:`rolltap.results.failure`):

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
from rolltap.results.failure import FailureTrace

__all__ = ["SessionMetrics", "duration_of", "task_id_of"]

_CODE_LENGTH = 64
_TASK_ID_LENGTH = 255


def _number(value: Any) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return 0


@dataclass(slots=True)
class SessionMetrics(FailureTrace):
    """Running totals over a session's events, extended by each commit's new events: the
    tokens, and what the events say of a failure (:class:`FailureTrace`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def of(cls, events: Iterable[Event]) -> SessionMetrics:
        metrics = cls()
        metrics.add(events)
        return metrics

    def add(self, events: Iterable[Event]) -> None:
        """Count ``events`` (those past what was already counted)."""
        for event in events:
            if event.kind == EventKind.MODEL_RESPONSE:
                usage = event.payload.get("usage")
                if isinstance(usage, Mapping):
                    self.prompt_tokens += _number(usage.get("prompt_tokens"))
                    self.completion_tokens += _number(usage.get("completion_tokens"))
            else:
                self.see(event)

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
