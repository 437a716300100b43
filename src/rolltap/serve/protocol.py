"""What the supervisor and its workers say to each other, and how it is framed.

Each worker talks to the supervisor over one channel: a socket pair (a child process) or
a TCP connection (a Ray actor, which opens it with ``hello``). A frame is a 4-byte
big-endian length and an orjson object whose ``type`` is a :class:`Msg`:

==================  =========  ===============================================================
type                direction  fields
==================  =========  ===============================================================
``hello``           W → S      ``ticket`` (first frame on a TCP channel: a Ray actor's)
``config``          S → W      the :class:`WorkerConfig` (first frame; holds the store URL)
``ready``           W → S      ``pid``
``submit``          S → W      ``job``, ``run_id``, ``session_id``, ``spec`` (a RolloutSpec)
``cancel``          S → W      ``job``: stop that rollout (it ends ``cancelled``)
``result``          W → S      ``job``, ``result`` (a finished rollout, see ``RolloutResult``)
``stats``           W → S      the heartbeat: RSS, files, sockets, threads, lag, pool, trim …
``store``           W → S      ``id``, ``op`` and its arguments (SQLite: the supervisor writes)
``store_reply``     S → W      ``id``, ``ok``, ``value`` or ``error``
``store_state``     W → S      the worker's own writer (server backends), on each change:
                               ``unavailable_s``, ``pending_commits``/``_bytes``, ``over``
``policy``          S → W      ``id``, ``op``: ``version`` (``version``), ``pause``
                               (``mode``), ``resume`` — each with ``endpoint`` (null: all)
                               and ``forward`` (false: the gates only, the engine is told
                               by another worker) — or ``sync`` (``endpoints``: each one's
                               ``version`` and ``paused``, sent on ``ready``, before any
                               ``submit``); the worker's gateway applies it
``policy_reply``    W → S      ``id``, ``ok``, ``value`` (the gateway's ``GET /policy``
                               document after the change) or ``error`` (code, status, …)
``shutdown``        S → W      finish, flush and exit
==================  =========  ===============================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ServeError
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.rollouts.config import LimitsConfig
from rolltap.rollouts.rewards import parse_reward_spec
from rolltap.rollouts.tasks import Task, task_from_dict
from rolltap.store import WriterStats

__all__ = [
    "Channel",
    "ChannelClosedError",
    "Msg",
    "RolloutSpec",
    "WorkerConfig",
    "store_report",
]

_HEADER = struct.Struct(">I")
#: the largest frame either side accepts (a commit of a huge first prompt fits)
MAX_FRAME = 512 * 1024 * 1024


class Msg(StrEnum):
    """Frame types (see the module docstring)."""

    HELLO = "hello"
    CONFIG = "config"
    READY = "ready"
    SUBMIT = "submit"
    CANCEL = "cancel"
    RESULT = "result"
    STATS = "stats"
    STORE = "store"
    STORE_REPLY = "store_reply"
    STORE_STATE = "store_state"
    POLICY = "policy"
    POLICY_REPLY = "policy_reply"
    SHUTDOWN = "shutdown"


class ChannelClosedError(ServeError):
    """The other side of a supervisor↔worker channel went away."""

    code = "serve_channel_closed"
    status = 503


#: a segment of a task file's path: not empty, ".", ".." or holding "/" or NUL
_SEGMENT = r"(?:[^/.\x00][^/\x00]*|\.[^/.\x00][^/\x00]*|\.\.[^/\x00]+)"
FILE_PATH = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
#: what the OpenAPI document says a task is (``task_from_dict`` is what checks it)
TASK_SCHEMA: dict[str, Any] = {
    "properties": {
        "id": {"description": "default: 1"},
        "prompt": {"type": ["string", "null"]},
        "messages": {"type": ["array", "null"], "items": {"type": "object"}},
        "answer": {"description": "compared as a string"},
        "info": {"type": ["object", "null"]},
        "files": {
            "type": ["object", "null"],
            # relative paths inside the directory (narrower than what is taken: no "."
            # or empty segment either, which a schema without look-ahead cannot allow
            # while refusing ".." segments)
            "patternProperties": {FILE_PATH: {"type": "string"}},
            "additionalProperties": False,
            "description": "relative path -> content, placed in the working directory",
        },
        "check": {
            "type": ["string", "null"],
            "pattern": r"\S",
            "description": "shell command run in the working directory after the harness",
        },
        "check_timeout_s": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "harness": {
            "anyOf": [AgentOptions.model_json_schema(), {"type": "null"}],
            "description": "agent flags over harness_options (claude-code, codex)",
        },
    },
    "anyOf": [
        {"required": ["prompt"], "properties": {"prompt": {"type": "string"}}},
        {"required": ["messages"], "properties": {"messages": {"type": "array"}}},
    ],
}
#: ``NAME`` or ``NAME=WEIGHT``, as documented (the parser also takes other spellings of
#: a positive weight, like ``2e-1``)
REWARD_PATTERN = r"^[A-Za-z0-9_.:-]+(=[1-9][0-9]{0,8}(\.[0-9]{1,9})?)?$"


class RolloutSpec(BaseModel):
    """One rollout to run: the task, how to run it, and how to score it.

    ``harness`` is a built-in (``chat``, ``tool-agent``, ``messages-tool-agent``, the
    agents ``claude-code`` and ``codex``) or ``module:function`` importable by the
    workers; ``cmd`` runs a shell command instead; ``harness_options`` are an agent's
    flags (a run config's ``[harness]`` table). ``endpoint`` names one of the service's
    endpoints (default: its first). ``user`` keeps model clients apart per user.
    ``block_loop_s`` is a test hook: honoured only when the service runs with
    ``test_hooks``, it makes the worker block its own event loop that long.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: dict[str, Any] = Field(json_schema_extra=TASK_SCHEMA)
    sample: int = Field(default=0, ge=0, le=2**63 - 1)
    harness: str = "chat"
    harness_options: AgentOptions | None = None
    cmd: str | None = None
    endpoint: str | None = None
    rewards: list[str] = Field(
        default_factory=lambda: ["contains"], min_length=1,
        json_schema_extra={"items": {"type": "string", "pattern": REWARD_PATTERN}},
    )  # fmt: skip
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    sampling: dict[str, Any] = Field(default_factory=dict)
    user: str | None = None
    block_loop_s: float | None = Field(default=None, gt=0)

    @field_validator("task")
    @classmethod
    def _valid_task(cls, value: dict[str, Any]) -> dict[str, Any]:
        task_from_dict(value, "1")  # raises ValueError naming the problem
        return value

    @field_validator("rewards")
    @classmethod
    def _valid_rewards(cls, value: list[str]) -> list[str]:
        for spec in value:
            parse_reward_spec(spec)
        return value

    def to_task(self) -> Task:
        return task_from_dict(self.task, "1")


class WorkerConfig(BaseModel):
    """Everything a worker needs, sent as its first frame (never on its command line)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    endpoints: list[EndpointConfig] = Field(min_length=1)
    gateway: GatewaySettings
    #: a PostgreSQL/MySQL URL the worker writes to itself; None: ship writes to the supervisor
    store_url: str | None = Field(default=None, repr=False)
    stats_interval_s: float = Field(gt=0)
    max_rollout_s: float = Field(gt=0)
    trim: bool = True
    test_hooks: bool = False
    #: decided by the supervisor (flag, else environment): the worker only obeys
    otel: bool = False
    otel_content: bool = False
    store_unavailable_timeout_s: float = Field(default=300.0, gt=0)
    #: where this worker writes what it could not save (None: the current directory)
    unsaved_dir: str | None = None
    #: the built-in harnesses imported before the worker says ready (None: every one)
    preload_harnesses: list[str] | None = None


class Channel:
    """Length-prefixed orjson frames over an asyncio stream pair.

    ``send`` writes one whole frame at a time (a lock keeps concurrent senders from
    interleaving drains); ``recv`` returns ``None`` at end of stream.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def over(cls, sock: Any) -> Channel:
        """A channel on a connected Unix socket."""
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=2**20)
        return cls(reader, writer)

    async def send(self, message: dict[str, Any]) -> None:
        """Send one message; ``ChannelClosedError`` if the peer is gone."""
        body = orjson.dumps(message)
        if self._closed or self._writer.is_closing():
            raise ChannelClosedError("the channel is closed")
        async with self._lock:
            try:
                self._writer.writelines([_HEADER.pack(len(body)), body])
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                raise ChannelClosedError(f"the peer went away: {exc}") from exc

    def send_nowait(self, message: dict[str, Any]) -> None:
        """Queue one small message on the transport without waiting for it to drain."""
        if self._closed or self._writer.is_closing():
            raise ChannelClosedError("the channel is closed")
        body = orjson.dumps(message)
        # one synchronous write: it cannot land inside a frame that send() is writing
        self._writer.writelines([_HEADER.pack(len(body)), body])

    async def recv(self) -> dict[str, Any] | None:
        """The next message, or ``None`` once the peer has closed its end."""
        try:
            header = await self._reader.readexactly(_HEADER.size)
            (size,) = _HEADER.unpack(header)
            if size > MAX_FRAME:
                raise ChannelClosedError(f"frame of {size} bytes is over the limit")
            body = await self._reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return None
        message = orjson.loads(body)
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ChannelClosedError("malformed frame")
        return message

    async def aclose(self) -> None:
        """Close our end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        # a peer that is gone already leaves nothing to flush
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


def store_report(stats: WriterStats, max_bytes: int) -> dict[str, Any]:
    """One writer's health, as a worker reports it and ``/status`` shows it."""
    return {
        "unavailable_s": None if stats.unavailable_s is None else round(stats.unavailable_s, 1),
        "pending_commits": stats.pending_commits,
        "pending_bytes": stats.pending_bytes,
        "over": stats.pending_bytes >= max_bytes,
        "full_s": None if stats.full_s is None else round(stats.full_s, 1),
    }
