"""The event model: what one entry of a rollout's history is.

A rollout's history is a list of :class:`Event` s with a per-session sequence number
(0-based, dense), a kind, a wall-clock timestamp and a JSON payload. The kinds and
their payloads are documented in ``docs/events.md`` under :data:`FORMAT_VERSION`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["FORMAT_VERSION", "ID_LENGTH", "Event", "EventKind"]

#: the longest rollout (session) id, run id or other id the store keeps
ID_LENGTH = 64

#: version of the event payload format; bumped on any incompatible payload change
FORMAT_VERSION = 1


class EventKind(StrEnum):
    """What an event records. Payload fields per kind are documented in docs/events.md."""

    MODEL_REQUEST = "model_request"
    MODEL_RESPONSE = "model_response"
    MODEL_ERROR = "model_error"
    TOKEN_COUNT = "token_count"
    HARNESS_OUTPUT = "harness_output"
    #: a task's ``check`` command, run in the rollout's working directory
    CHECK = "check"
    REWARD = "reward"
    STATUS = "status"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Event:
    """One immutable entry in a rollout's history."""

    seq: int
    kind: str
    ts: float
    payload: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "ts": self.ts, "payload": self.payload}
