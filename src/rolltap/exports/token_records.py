"""Token records: the ``tokens`` object of a ``model_response`` event, read and checked.

The contract is ``docs/events.md``, "Token records"; the training export
(:mod:`rolltap.exports.tokens`), the Hugging Face export and the viewer read records
through :func:`rolltap.exports.tokens.token_turn` (:func:`read_turn` with the
renders it knows), and build sequences from :class:`Segment`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rolltap.errors import StoreError

__all__ = ["Segment", "TokenRecordError", "TokenTurn", "read_turn"]


class TokenRecordError(StoreError):
    """A stored ``model_response`` event's ``tokens`` record does not follow the contract
    (``docs/events.md``, "Token records"); token exports list its session as malformed."""

    code = "store_bad_token_record"


@dataclass(frozen=True, slots=True)
class TokenTurn:
    """One model call's token record: the ``tokens`` object of its ``model_response``."""

    seq: int
    prompt_ids: list[int]
    completion_ids: list[int]
    #: one per completion id (``None`` where the upstream gave none); ``None``: no logprobs
    completion_logprobs: list[float | None] | None
    render: str
    #: the recorded ``drift`` (``{at, expected, got, reason}``), when the prompt drifted
    drift: dict[str, Any] | None = None
    #: ``{"version", "start", "end"}`` spans over ``completion_ids``, covering each once
    policy_versions: list[dict[str, Any]] = field(default_factory=list)
    #: how many times the completion was resubmitted after an abort (abort and continue)
    continued: int = 0


def _ids(record: Mapping[str, Any], name: str) -> list[int]:
    value = record.get(name)
    if not isinstance(value, list) or not all(type(i) is int and i >= 0 for i in value):
        raise TokenRecordError(f"{name} must be a list of non-negative integers")
    return value


def _logprobs(record: Mapping[str, Any], count: int) -> list[float | None] | None:
    value = record.get("completion_logprobs")
    if value is None:
        return None
    numbers = isinstance(value, list) and all(
        lp is None or (isinstance(lp, int | float) and not isinstance(lp, bool)) for lp in value
    )
    if not numbers or len(value) != count:
        raise TokenRecordError("completion_logprobs must hold one number (or null) per id")
    return [None if lp is None else float(lp) for lp in value]


def _drift(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    at = value.get("at") if isinstance(value, Mapping) else None
    if type(at) is not int or at < 0:
        raise TokenRecordError("drift must be an object with a non-negative integer at")
    for name in ("expected", "got"):
        _ids(value, name)
    reason = value.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise TokenRecordError("drift.reason must be a string or null")
    return dict(value)


def _spans(
    record: Mapping[str, Any], payload: Mapping[str, Any], count: int
) -> list[dict[str, Any]]:
    """The record's ``policy_versions``; for a record without (one from before policy
    versions, a relay's server-side capture), one span of the answer's ``policy_version``."""
    value = record.get("policy_versions")
    if value is None:
        version = payload.get("policy_version")
        version = version if isinstance(version, str) else None
        return [{"version": version, "start": 0, "end": count}] if count else []
    if not isinstance(value, list):
        raise TokenRecordError(_BAD_SPANS)
    spans, at = [], 0
    for span in value:
        if not _span_at(span, at):
            raise TokenRecordError(_BAD_SPANS)
        spans.append({"version": span.get("version"), "start": at, "end": span["end"]})
        at = span["end"]
    if at != count:
        raise TokenRecordError(f"policy_versions cover {at} completion ids, not {count}")
    return spans


_BAD_SPANS = (
    "policy_versions must be {version, start, end} spans (version a string or null) "
    "covering each completion id once, in order"
)


def _span_at(span: Any, at: int) -> bool:
    """Whether ``span`` is a well-formed span that starts at ``at``."""
    if not isinstance(span, Mapping):
        return False
    version, start, end = span.get("version"), span.get("start"), span.get("end")
    named = version is None or isinstance(version, str)
    return named and type(start) is int and start == at and type(end) is int and end > at


def _continued(record: Mapping[str, Any]) -> int:
    value = record.get("continued", 0)
    if type(value) is not int or value < 0:
        raise TokenRecordError("continued must be a non-negative integer")
    return value


def read_turn(seq: int, payload: Mapping[str, Any], renders: tuple[str, ...]) -> TokenTurn | None:
    """The token record of a ``model_response`` payload; ``None`` when it has none.

    Raises :class:`TokenRecordError` for a record that breaks the contract (its
    ``render`` one of ``renders``).
    """
    record = payload.get("tokens")
    if record is None:
        return None
    if not isinstance(record, Mapping):
        raise TokenRecordError("tokens must be an object")
    completion = _ids(record, "completion_ids")
    render = record.get("render")
    if render not in renders:
        raise TokenRecordError(f"render must be one of {', '.join(renders)}, not {render!r}")
    return TokenTurn(
        seq=seq,
        prompt_ids=_ids(record, "prompt_ids"),
        completion_ids=completion,
        completion_logprobs=_logprobs(record, len(completion)),
        render=str(render),
        drift=_drift(record.get("drift")),
        policy_versions=_spans(record, payload, len(completion)),
        continued=_continued(record),
    )


@dataclass(slots=True)
class Segment:
    """One training sequence: ids, ``1`` where the model sampled them, their logprobs, and
    the policy version of each sampled id (spans over ``tokens`` positions)."""

    tokens: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    policy_versions: list[dict[str, Any]] = field(default_factory=list)

    def add(self, turn: TokenTurn) -> None:
        """Append the part of ``turn``'s prompt not yet in the sequence, then its completion."""
        prompt = turn.prompt_ids[len(self.tokens) :]
        completion = turn.completion_ids
        sampled = turn.completion_logprobs or [None] * len(completion)
        self.tokens += prompt
        at = len(self.tokens)
        self.tokens += completion
        self.loss_mask += [0] * len(prompt) + [1] * len(completion)
        self.logprobs += [None] * len(prompt) + sampled
        spans = self.policy_versions
        for span in turn.policy_versions:
            start, end = span["start"] + at, span["end"] + at
            if spans and spans[-1]["end"] == start and spans[-1]["version"] == span["version"]:
                spans[-1] = {**spans[-1], "end": end}  # one version on, across turns
            else:
                spans.append({"version": span["version"], "start": start, "end": end})

    def cut(self, length: int) -> None:
        """Keep only the first ``length`` ids (where a drifted prompt parts from them)."""
        del self.tokens[length:], self.loss_mask[length:], self.logprobs[length:]
        self.policy_versions = [
            {**s, "end": min(s["end"], length)} for s in self.policy_versions if s["start"] < length
        ]

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "loss_mask": self.loss_mask, "logprobs": self.logprobs,
                "policy_versions": self.policy_versions}  # fmt: skip
