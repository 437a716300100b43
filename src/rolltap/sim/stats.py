"""Observable simulator state: counters, gates, and waiting on changes without polling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ROUTING_HEADERS", "Gate", "SimStats", "StatsBoard", "wait_either"]

#: the headers a gateway sends to route a rollout's calls, and the :class:`SimStats`
#: field that counts requests per value of each
ROUTING_HEADERS: dict[str, str] = {
    "x-rolltap-rollout": "requests_by_rollout",
    "x-session-id": "requests_by_session",
    "x-smg-routing-key": "requests_by_routing_key",
}
# Distinct values kept per header: a long soak must not grow the simulator without bound.
_KEYS_LIMIT = 100_000


@dataclass
class SimStats:
    """Live counters of a :class:`~rolltap.sim.Simulator`'s model requests (chat
    completions, Responses, Messages, count_tokens and the token completion routes; not
    ``/v1/models`` or ``/health``).

    ``completed`` counts responses written in full (error statuses included);
    ``disconnected`` counts requests whose client went away before that; a ``drop`` or
    ``reset`` fault is counted in ``faults`` only. The weight-update counters are
    :mod:`rolltap.sim.weights`'s: a generation is a model request past the pause (not
    ``count_tokens``).
    """

    requests: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    completed: int = 0
    disconnected: int = 0
    #: injected faults by kind (``"status"``, ``"drop"``, …)
    faults: dict[str, int] = field(default_factory=dict)
    #: distinct client TCP connections seen (by peer address)
    connections: int = 0
    #: the parsed JSON body of the latest request
    last_request_body: Any = None
    #: the latest request's headers, names in lower case
    last_request_headers: dict[str, str] = field(default_factory=dict)
    #: prompt tokens that hit the prefix cache, and that missed it (prefilled); both stay
    #: 0 unless the config has a prefix cache or a prefill cost
    prefix_hit_tokens: int = 0
    prefix_miss_tokens: int = 0
    #: requests per value of ``X-Rolltap-Rollout``, ``X-Session-ID`` and
    #: ``X-SMG-Routing-Key`` (the first 100 000 values of each)
    requests_by_rollout: dict[str, int] = field(default_factory=dict)
    requests_by_session: dict[str, int] = field(default_factory=dict)
    requests_by_routing_key: dict[str, int] = field(default_factory=dict)
    #: scripted turns used per session (``""``: the shared session of calls without
    #: ``X-Rolltap-Rollout`` or ``X-Session-ID``); empty without a script
    script_turns: dict[str, int] = field(default_factory=dict)
    #: generations in flight now (admitted, not yet answered), and of them those frozen by
    #: a pause that keeps them (``/pause?mode=keep``, ``/pause_generation`` in place)
    generating: int = 0
    frozen: int = 0
    #: new requests waiting for the end of a pause now
    held: int = 0
    #: generations answered as aborted (with what they had generated)
    aborted: int = 0
    #: ``POST /update_weight_version`` calls, and pauses (either engine's route)
    weight_updates: int = 0
    pauses: int = 0
    #: tokens generated (a stream's token events), counted one by one when paced
    tokens_generated: int = 0

    @property
    def prefix_hit_rate(self) -> float | None:
        """Hit tokens over all counted prompt tokens; ``None`` before any was counted."""
        total = self.prefix_hit_tokens + self.prefix_miss_tokens
        return self.prefix_hit_tokens / total if total else None

    def count_routing(self, headers: Mapping[str, str]) -> None:
        """Count one request under each routing header it carries."""
        for header, name in ROUTING_HEADERS.items():
            value = headers.get(header)
            if value is None:
                continue
            counts: dict[str, int] = getattr(self, name)
            if value in counts or len(counts) < _KEYS_LIMIT:
                counts[value] = counts.get(value, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        """The counters as JSON-ready data (``GET /stats``); no request bodies or headers,
        which may carry credentials."""
        return {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "completed": self.completed,
            "disconnected": self.disconnected,
            "faults": dict(self.faults),
            "connections": self.connections,
            "prefix_hit_tokens": self.prefix_hit_tokens,
            "prefix_miss_tokens": self.prefix_miss_tokens,
            "prefix_hit_rate": self.prefix_hit_rate,
            "requests_by_rollout": dict(self.requests_by_rollout),
            "requests_by_session": dict(self.requests_by_session),
            "requests_by_routing_key": dict(self.requests_by_routing_key),
            "script_turns": dict(self.script_turns),
            "generating": self.generating,
            "frozen": self.frozen,
            "held": self.held,
            "aborted": self.aborted,
            "weight_updates": self.weight_updates,
            "pauses": self.pauses,
            "tokens_generated": self.tokens_generated,
        }


class Gate:
    """A named barrier: requests sent with ``x-sim-gate: NAME`` wait here until opened.

    A streamed request waits after its first event, a non-stream one before responding.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._reached = asyncio.Event()
        self._opened = asyncio.Event()
        self._held = 0

    @property
    def held(self) -> int:
        """How many requests are waiting at the gate now."""
        return self._held

    @property
    def is_open(self) -> bool:
        """Whether :meth:`open` was called."""
        return self._opened.is_set()

    async def wait_reached(self) -> None:
        """Return once a request has been held at this gate (immediately if one already was)."""
        await self._reached.wait()

    def open(self) -> None:
        """Release every current holder; later arrivals pass straight through."""
        self._opened.set()

    async def hold(self, abort: asyncio.Event | None = None) -> None:
        """Wait at the gate until it is opened, or until ``abort`` is set (the server calls
        this for a request)."""
        self._held += 1
        self._reached.set()
        try:
            if abort is None:
                await self._opened.wait()
            else:
                await wait_either(self._opened, abort)
        finally:
            self._held -= 1


async def wait_either(first: asyncio.Event, second: asyncio.Event) -> None:
    """Wait until either event is set."""
    if first.is_set() or second.is_set():
        return
    async with asyncio.TaskGroup() as group:
        waits = [group.create_task(first.wait()), group.create_task(second.wait())]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()


class StatsBoard:
    """Owns the :class:`SimStats` and wakes :meth:`wait_for` callers on every change."""

    def __init__(self) -> None:
        self.stats = SimStats()
        self._cond = asyncio.Condition()
        self._watchers = 0
        self._peers: set[Any] = set()

    def saw_peer(self, peer: Any) -> None:
        """Record a client connection's peer address."""
        if peer is not None and peer not in self._peers:
            self._peers.add(peer)
            self.stats.connections = len(self._peers)

    async def changed(self) -> None:
        """Wake the waiters, if any (the hot path pays one comparison when none)."""
        if self._watchers:
            async with self._cond:
                self._cond.notify_all()

    async def wait_for(self, predicate: Callable[[SimStats], bool]) -> SimStats:
        """Wait until ``predicate(stats)`` holds (callers bound it with a timeout)."""
        self._watchers += 1
        try:
            async with self._cond:
                await self._cond.wait_for(lambda: predicate(self.stats))
        finally:
            self._watchers -= 1
        return self.stats
