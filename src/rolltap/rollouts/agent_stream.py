"""An agent's JSON event stream (one JSON object a line on stdout), read as it comes.

Each line is kept in the rollout's log as a ``harness_output`` event, in order with the
model calls the gateway records (``{"stream": "stdout", "text": LINE, "bytes": N}``,
``text`` at most its first 64 KiB), and each JSON object is handed to the agent's
:class:`EventReader`, which finds the answer in it once the agent exited.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from rolltap.errors import HarnessError
from rolltap.events import EventKind, EventLog
from rolltap.rollouts.process import OUTPUT_LIMIT

__all__ = ["AgentFailedError", "EventReader", "LineRecorder"]


class AgentFailedError(HarnessError):
    """The agent CLI (``claude``, ``codex``) ended without an answer: its own error, or
    its exit status."""

    code = "agent_failed"


class EventReader(Protocol):
    """What an agent kind reads from its events."""

    def feed(self, event: dict[str, Any]) -> None:
        """One JSON object the agent printed."""

    def answer(self, returncode: int, stderr: str) -> str:
        """The agent's final message; ``AgentFailedError`` when its turn failed."""


class LineRecorder:
    """The ``on_line`` of an agent process: records each line, feeds ``reader``."""

    def __init__(self, log: EventLog, reader: EventReader) -> None:
        self.log, self.reader = log, reader

    def __call__(self, line: bytes) -> None:
        if not line.strip():
            return
        text = line[:OUTPUT_LIMIT].decode(errors="replace")
        self.log.append(
            EventKind.HARNESS_OUTPUT, {"stream": "stdout", "text": text, "bytes": len(line)}
        )
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            return  # a line that is not an event (a warning): kept, not read
        if isinstance(event, dict):
            self.reader.feed(event)
