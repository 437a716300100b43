"""The service's policy: a trainer's versions and pauses, applied to every worker's gateway.

``rolltap serve``'s ``GET/POST /policy``, ``POST /pause`` and ``POST /resume`` (the
gateway's routes, :mod:`rolltap.gateway.policy_routes`) drive a :class:`ServicePolicy`.
Each change is recorded here, then sent as a ``policy`` frame to every ready worker, and
answered once every one of them has applied it (a ``drain`` once none has a call in
flight); a worker's error comes back as the caller's, and a pause the engine did not take
(``forward_pause_failed``) is undone on every worker, as the gateway undoes its own. A
worker lost meanwhile is not waited for: its replacement, like any
worker that becomes ready, gets the recorded state in a ``sync`` frame before its first
rollout.

With ``max_staleness`` and ``rollouts_per_version``, the rollouts that may begin are
counted here, for the whole service (:meth:`ServicePolicy.admit`; the workers' gateways
count nothing): a batch that would run too far ahead of the trainer is refused with the
retryable ``429 service_full`` until a new version makes room.

Where an endpoint forwards its pauses (``forward_pause``), one worker tells the engine
and the rest change their gates only, in an order that keeps the two in step: a pause
pauses (and drains) the other workers first, then the one that pauses the engine; a
resume resumes the engine first, then the others.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rolltap.config import EndpointConfig
from rolltap.errors import InvalidRequestError, RolltapError, ServiceFullError
from rolltap.gateway.ahead import AheadBound
from rolltap.gateway.policy import PauseMode
from rolltap.serve.protocol import ChannelClosedError, Msg
from rolltap.serve.remote_errors import error_from_wire
from rolltap.serve.supervisor.placement import WorkerHandle

__all__ = ["ServicePolicy"]

log = logging.getLogger("rolltap.serve.supervisor")

#: the per-worker counters summed into the service's view of an endpoint
_SUMMED = ("in_flight", "held", "cut", "refused")


@dataclass(slots=True)
class _Endpoint:
    """What the service holds of one endpoint's policy."""

    version: str | None = None
    epoch: int = 0
    paused: PauseMode | None = None
    paused_at: float | None = None
    pauses: int = 0
    ahead: AheadBound | None = None


class ServicePolicy:
    """The service's versions and pauses, and their fan-out to the workers."""

    def __init__(
        self,
        endpoints: Sequence[EndpointConfig],
        ready: Callable[[], list[WorkerHandle]],
        *,
        max_staleness: int | None = None,
        rollouts_per_version: int | None = None,
    ) -> None:
        """``ready``: the workers a change goes to (those ready now)."""
        self._state = {
            ep.name: _Endpoint(ahead=AheadBound.of(max_staleness, rollouts_per_version))
            for ep in endpoints
        }
        self._forwarding = {ep.name for ep in endpoints if ep.forward_pause is not None}
        self._ready, self.max_staleness = ready, max_staleness
        self._ids = itertools.count(1)
        self._waits: dict[int, tuple[WorkerHandle, asyncio.Future[dict[str, Any] | None]]] = {}

    # -- the workers' side -------------------------------------------------------------

    def sync_frame(self) -> dict[str, Any]:
        """What a worker that became ready is sent before anything else."""
        endpoints = {name: {"version": st.version, "paused": st.paused}
                     for name, st in self._state.items()}  # fmt: skip
        return {"type": Msg.POLICY, "id": 0, "op": "sync", "endpoints": endpoints}

    def on_ready(self, handle: WorkerHandle) -> None:
        """``handle`` just said ready: send it the state (queued before any submit)."""
        if handle.channel is not None:
            try:
                handle.channel.send_nowait(self.sync_frame())
            except ChannelClosedError:
                return  # it is going: its loss is handled elsewhere

    def on_reply(self, handle: WorkerHandle, message: dict[str, Any]) -> None:
        """A ``policy_reply`` came from ``handle``."""
        value = message.get("value")
        if message.get("ok") and isinstance(value, dict):
            handle.policy = value.get("endpoints") or handle.policy
        waiting = self._waits.pop(int(message.get("id") or 0), None)
        if waiting is not None and not waiting[1].done():
            waiting[1].set_result(message)
        elif not message.get("ok"):  # a sync (nobody waits for it) the worker refused
            log.warning("worker %d did not take the policy: %s", handle.index, message.get("error"))

    def on_lost(self, handle: WorkerHandle) -> None:
        """``handle`` is gone: nothing waits for its replies any more."""
        for key, (owner, future) in list(self._waits.items()):
            if owner is handle:
                del self._waits[key]
                if not future.done():
                    future.set_result(None)

    def admit(self, counts: dict[str, int]) -> None:
        """Count ``counts[endpoint]`` rollouts as begun on each endpoint, or refuse them all
        with ``ServiceFullError`` where they would run too far ahead of the trainer."""
        for name, count in counts.items():
            st = self._state[name]
            if st.ahead is not None and count > (room := st.ahead.room(st.epoch)):
                raise ServiceFullError(
                    f"endpoint {name!r}: {room} more rollouts may begin before the next "
                    f"policy version, the batch has {count} (max_staleness = "
                    f"{st.ahead.max_staleness}, rollouts_per_version = "
                    f"{st.ahead.per_version}); retry after a POST /policy",
                    retry_after=1.0,
                )
        for name, count in counts.items():
            st = self._state[name]
            if st.ahead is not None:
                st.ahead.begin(st.epoch, count)

    # -- the trainer's side (what the routes drive) -------------------------------------

    def policy(self) -> dict[str, Any]:
        """Each endpoint's version and pause (the service's), with the workers' counters
        summed, and each worker's own gates (``GET /policy``)."""
        workers = [h for h in self._ready() if h.policy]
        endpoints = {}
        for name, st in self._state.items():
            since = st.paused_at
            doc: dict[str, Any] = {
                "version": st.version, "epoch": st.epoch, "paused": st.paused,
                "paused_for_s": None if since is None else round(time.monotonic() - since, 3),
                "pauses": st.pauses, "max_staleness": self.max_staleness,
                "rollouts_per_version": None if st.ahead is None else st.ahead.per_version,
                "began": None if st.ahead is None else st.ahead.began,
            }  # fmt: skip
            for counter in _SUMMED:
                doc[counter] = sum(_count(h.policy.get(name), counter) for h in workers)
            endpoints[name] = doc
        per_worker = [{"index": h.index, "endpoints": h.policy} for h in workers]
        return {"endpoints": endpoints, "workers": per_worker}

    async def set_policy_version(
        self, version: str | None, *, endpoint: str | None = None
    ) -> dict[str, Any]:
        """Make ``version`` current on ``endpoint`` (None: every endpoint), on every worker."""
        for name in self._named(endpoint):
            st = self._state[name]
            if st.version != version:
                st.version, st.epoch = version, st.epoch + 1
        await self._fan_out({"op": "version", "version": version, "endpoint": endpoint})
        return self.policy()

    async def pause(self, mode: PauseMode, *, endpoint: str | None = None) -> dict[str, Any]:
        """Pause ``endpoint`` (None: every endpoint) on every worker; with ``drain``, once
        no worker has a call in flight. The answer adds how many requests were cut."""
        names = self._named(endpoint)
        fresh = [name for name in names if self._state[name].paused is None]
        for name in names:
            st = self._state[name]
            if st.paused is None:
                st.paused_at, st.pauses = time.monotonic(), st.pauses + 1
            st.paused = mode
        frame = {"op": "pause", "mode": mode, "endpoint": endpoint}
        try:
            replies = await self._phased(frame, names, engine_last=True)
        except RolltapError:
            await self._undo(fresh)
            raise
        cut = sum(_count(reply.get("value"), "cut") for reply in replies)
        return {**self.policy(), "cut": cut}

    async def _undo(self, names: list[str]) -> None:
        """A pause the engine did not take is undone, as the gateway undoes its own: the
        endpoints it paused are resumed on every worker's gates (the worker that told the
        engine undid its part already); those paused before stay paused."""
        for name in names:
            self._state[name].paused = self._state[name].paused_at = None
            await self._fan_out({"op": "resume", "endpoint": name, "forward": False})

    async def resume(self, *, endpoint: str | None = None) -> dict[str, Any]:
        """End the pause of ``endpoint`` (None: every endpoint) on every worker."""
        names = self._named(endpoint)
        for name in names:
            self._state[name].paused = self._state[name].paused_at = None
        await self._phased({"op": "resume", "endpoint": endpoint}, names, engine_last=False)
        return self.policy()

    # -- fan-out -------------------------------------------------------------------------

    def _named(self, endpoint: str | None) -> list[str]:
        if endpoint is None:
            return list(self._state)
        if endpoint not in self._state:
            raise InvalidRequestError(f"no endpoint {endpoint!r}", field="endpoint")
        return [endpoint]

    async def _phased(
        self, frame: dict[str, Any], names: list[str], *, engine_last: bool
    ) -> list[dict[str, Any]]:
        """Send a pause or resume to every worker; with an engine to tell, the worker that
        tells it goes last (a pause) or first (a resume), the others change their gates."""
        ready = self._ready()
        if not ready or not self._forwarding.intersection(names):
            return await self._fan_out(frame, ready)
        teller, others = ready[0], ready[1:]
        phases = [([teller], True), (others, False)]
        replies = []
        for handles, forward in reversed(phases) if engine_last else phases:
            replies += await self._fan_out({**frame, "forward": forward}, handles)
        return replies

    async def _fan_out(
        self, frame: dict[str, Any], handles: list[WorkerHandle] | None = None
    ) -> list[dict[str, Any]]:
        """Send ``frame`` to ``handles`` (default: every ready worker) at once, in this
        order on every channel; their replies, once all came (a lost worker's dropped).
        Raises the first error a worker answered with."""
        waits = []
        for handle in self._ready() if handles is None else handles:
            if handle.channel is None or handle.state != "ready":
                continue
            key = next(self._ids)
            future: asyncio.Future[dict[str, Any] | None] = (
                asyncio.get_running_loop().create_future()
            )
            try:
                handle.channel.send_nowait({"type": Msg.POLICY, "id": key, **frame})
            except ChannelClosedError:
                continue  # it is going: its replacement gets the state when ready
            self._waits[key] = (handle, future)
            waits.append(future)
        replies = [reply for reply in await asyncio.gather(*waits) if reply is not None]
        for reply in replies:
            if not reply.get("ok"):
                raise _error(reply)
        return replies


def _count(doc: Any, name: str) -> int:
    value = doc.get(name) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _error(reply: dict[str, Any]) -> RolltapError:
    error = reply.get("error")
    return error_from_wire(error if isinstance(error, dict) else {})
