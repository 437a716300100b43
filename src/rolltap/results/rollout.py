"""What one rollout produced, and the numbers the summary needs from its event log.

The events are read by kind and payload only (:class:`~rolltap.results.failure.EventLike`):
``rolltap.store.Event`` and anything shaped like it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rolltap.results.failure import EventLike, failure_of
from rolltap.results.statuses import DONE_STATUSES, HARNESS_RAN_STATUSES, NO_MODEL_CALLS, STALE

__all__ = [
    "CallStats",
    "RolloutResult",
    "call_stats",
    "describe_versions",
    "made_no_model_calls",
    "no_model_calls_note",
    "policy_versions",
]

_MODEL_RESPONSE, _MODEL_ERROR = "model_response", "model_error"


@dataclass(slots=True)
class CallStats:
    """Model calls of one rollout: token totals and per-call latencies (ms)."""

    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: answered calls whose prompt ids drifted from the previous turn's (``tokens.drift``)
    drifted: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    ttfc_ms: list[float] = field(default_factory=list)
    #: what the gateway itself added to each answered call (``timing.gateway_ms``)
    gateway_ms: list[float] = field(default_factory=list)
    #: the policy versions its answers were generated under, each once, first seen first
    versions: list[str] = field(default_factory=list)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def call_stats(events: Iterable[EventLike]) -> CallStats:
    """Tokens, drifted turns and latencies from ``model_response`` / ``model_error`` events."""
    stats = CallStats()
    for event in events:
        if event.kind == _MODEL_ERROR:
            stats.errors += 1
        if event.kind != _MODEL_RESPONSE:
            continue
        stats.calls += 1
        version = event.payload.get("policy_version")
        if version is not None and str(version) not in stats.versions:
            stats.versions.append(str(version))
        usage = event.payload.get("usage") or {}
        stats.prompt_tokens += int(_number(usage.get("prompt_tokens")) or 0)
        stats.completion_tokens += int(_number(usage.get("completion_tokens")) or 0)
        tokens = event.payload.get("tokens")
        if isinstance(tokens, dict) and "drift" in tokens:
            stats.drifted += 1
        timing = event.payload.get("timing") or {}
        total, ttfc = _number(timing.get("total_ms")), _number(timing.get("ttfc_ms"))
        if total is not None:
            stats.latencies_ms.append(total)
        if ttfc is not None:
            stats.ttfc_ms.append(ttfc)
        if (own := _number(timing.get("gateway_ms"))) is not None:
            stats.gateway_ms.append(own)
    return stats


def policy_versions(events: Iterable[EventLike]) -> list[str]:
    """The policy versions a rollout's ``model_response`` events carry, each once, in the
    order they first appear (none: every answer came before a version was set)."""
    return call_stats(events).versions


def describe_versions(versions: list[str]) -> str | None:
    """``policy v3`` or ``policy v3→v5`` (first and last, with how many between); None
    for no version.

    >>> describe_versions(["v3", "v4", "v5"]), describe_versions([])
    ('policy v3→v5 (3 versions)', None)
    """
    if not versions:
        return None
    if len(versions) == 1:
        return f"policy {versions[0]}"
    span = f"policy {versions[0]}→{versions[-1]}"
    return span if len(versions) == 2 else f"{span} ({len(versions)} versions)"


def made_no_model_calls(status: str, stats: CallStats) -> bool:
    """Whether a rollout that ended in ``status`` made no model call at all: no answer
    and no error, so its reward (a harness that printed the task scores 1) is not the
    model's."""
    return status in HARNESS_RAN_STATUSES and stats.calls == 0 and stats.errors == 0


def no_model_calls_note() -> dict[str, Any]:
    """The ``note`` event's payload for such a rollout (docs/events.md, "No model calls")."""
    message = "the rollout ended without a model call through the gateway: its reward says "
    return {"text": NO_MODEL_CALLS, "data": {"message": message + "nothing about the model"}}


@dataclass(slots=True)
class RolloutResult:
    """One rollout: which (task, sample), how it ended, its answer and reward.

    ``reward`` is ``None`` for ``error`` and ``cancelled`` rollouts (they say nothing
    about the model); ``failed`` and ``timeout`` rollouts score 0.0. A rollout that did
    not succeed has an ``error_code`` and ``error_message`` (the rule:
    :func:`rolltap.results.failure.failure_of`);
    ``commit_failed`` says its final store commit failed. ``no_model_calls`` flags a
    rollout whose harness ran but made not a single model call through the gateway (its
    reward says nothing about the model: see :func:`made_no_model_calls`).
    """

    task_id: str
    sample: int
    session_id: str | None
    status: str
    reward: float | None = None
    answer: str | None = None
    error: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    commit_failed: bool = False
    no_model_calls: bool = False
    components: dict[str, float] = field(default_factory=dict)
    calls: CallStats = field(default_factory=CallStats)
    #: seconds since the run started when the rollout was admitted
    started_s: float = 0.0
    duration_s: float = 0.0
    #: which attempt of its (task, sample) this is (0: the first; ``rolltap eval
    #: --retry-failed`` runs later ones) and the session it repeats
    attempt: int = 0
    retry_of: str | None = None

    def name_failure(self, model_error: tuple[str, str | None] | None) -> None:
        """Give a failed rollout its error code by the one rule
        (:func:`~rolltap.results.failure.failure_of`), unless its owner named one already;
        ``model_error`` is its last model error's (code, message)."""
        failure = failure_of(self.status, model_error=model_error, error=self.error)
        if self.error_code is None and failure is not None:
            self.error_code, self.error_message = failure

    def status_payload(self, limit: str | None = None) -> dict[str, Any]:
        """The final ``status`` event's payload: how the rollout ended and, when it has
        one, its failure's code and message (so the store's ``error_code`` column says
        what the run's summary says, a registration or reward error included)."""
        payload: dict[str, Any] = {
            "status": self.status, "error": self.error, "limit": limit, "answer": self.answer,
        }  # fmt: skip
        if self.error_code is not None:
            payload["error_code"], payload["error_message"] = self.error_code, self.error_message
        if self.no_model_calls:
            payload[NO_MODEL_CALLS] = True
        return payload

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "sample": self.sample,
            "session_id": self.session_id,
            "status": self.status,
            "reward": self.reward,
            "answer": self.answer,
            "error": self.error,
            "error_code": self.error_code,
            "components": self.components,
            "calls": self.calls.calls,
            "prompt_tokens": self.calls.prompt_tokens,
            "completion_tokens": self.calls.completion_tokens,
            "no_model_calls": self.no_model_calls,
        }

    def to_wire(self) -> dict[str, Any]:
        """:meth:`to_dict` and what a driver's summary needs besides (a serve worker's
        result: ``error_message``, model errors, per-call latencies, duration)."""
        return {
            **self.to_dict(),
            "error_message": self.error_message,
            "commit_failed": self.commit_failed,
            "model_errors": self.calls.errors,
            "latencies_ms": self.calls.latencies_ms,
            "ttfc_ms": self.calls.ttfc_ms,
            "gateway_ms": self.calls.gateway_ms,
            "duration_s": self.duration_s,
            "policy_versions": self.calls.versions,
            "attempt": self.attempt,
            "retry_of": self.retry_of,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RolloutResult:
        """A result as a worker sent it (:meth:`to_wire`; a result the supervisor made
        for a lost worker's rollout has only some of the keys)."""
        reward, duration = _number(data.get("reward")), _number(data.get("duration_s"))
        calls = CallStats(
            calls=int(_number(data.get("calls")) or 0),
            errors=int(_number(data.get("model_errors")) or 0),
            prompt_tokens=int(_number(data.get("prompt_tokens")) or 0),
            completion_tokens=int(_number(data.get("completion_tokens")) or 0),
            latencies_ms=[float(v) for v in data.get("latencies_ms") or ()],
            ttfc_ms=[float(v) for v in data.get("ttfc_ms") or ()],
            gateway_ms=[float(v) for v in data.get("gateway_ms") or ()],
            versions=[str(v) for v in data.get("policy_versions") or ()],
        )
        status = str(data.get("status") or "error")
        error = _text(data.get("error"))
        code = _text(data.get("error_code"))
        if code is None and status not in DONE_STATUSES and status != STALE:
            code = status  # e.g. worker_lost, decided by the supervisor
        return cls(
            task_id=str(data.get("task_id")), sample=int(_number(data.get("sample")) or 0),
            session_id=_text(data.get("session_id") or data.get("id")), status=status,
            reward=reward, answer=_text(data.get("answer")), error=error, error_code=code,
            error_message=_text(data.get("error_message")) or error,
            commit_failed=bool(data.get("commit_failed")),
            no_model_calls=bool(data.get("no_model_calls")),
            components={str(k): float(v) for k, v in (data.get("components") or {}).items()},
            calls=calls, duration_s=duration or 0.0,
            attempt=int(_number(data.get("attempt")) or 0), retry_of=_text(data.get("retry_of")),
        )  # fmt: skip


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
