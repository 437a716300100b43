"""The gateway's endpoints' policy gates, and the changes a trainer makes to them.

Each change names one endpoint or, with none, applies to all. A pause or resume of an
endpoint with ``forward_pause`` goes to its engine too (every replica), so the gateway
and the engine agree: the gateway pauses first (new calls are held from then on) and,
for ``drain``, waits for its calls in flight before pausing the engine; a resume goes to
the engine first, then lets the held calls go. With ``forward_pause``, an ``abort`` is
the engine's to make: it answers the requests it aborts with what they generated (the
token client continues them), so the gateway cuts nothing itself. A pause the engine
does not take (:class:`~rolltap.errors.ForwardPauseError`) is undone: the gateway resumes
what it paused, and so do the replicas that did pause.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from rolltap.clients.engine_control import forward_pause, forward_resume
from rolltap.clients.relay import RelayClient
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ConfigError, ForwardPauseError, InvalidRequestError
from rolltap.gateway.policy import PauseMode, PolicyGate
from rolltap.pool import Lease

__all__ = ["EndpointPolicies"]

log = logging.getLogger("rolltap.gateway.policies")

#: lends the model client of one of an endpoint's addresses (a replica's, or its own)
Borrow = Callable[[EndpointConfig, str | None], Awaitable[Lease[RelayClient]]]


class EndpointPolicies:
    """One :class:`~rolltap.gateway.policy.PolicyGate` per endpoint."""

    def __init__(
        self, endpoints: Sequence[EndpointConfig], settings: GatewaySettings, borrow: Borrow
    ) -> None:
        self._endpoints = {ep.name: ep for ep in endpoints}
        self.gates = {
            ep.name: PolicyGate(
                pause_max_s=settings.pause_max_s,
                max_staleness=settings.max_staleness,
                rollouts_per_version=settings.rollouts_per_version,
            )
            for ep in endpoints
        }
        self._borrow = borrow

    def snapshot(self) -> dict[str, Any]:
        """``GET /policy``: each endpoint's gate."""
        return {"endpoints": {name: gate.snapshot() for name, gate in self.gates.items()}}

    def _named(self, endpoint: str | None) -> list[str]:
        if endpoint is None:
            return list(self.gates)
        if endpoint not in self.gates:
            raise InvalidRequestError(f"no endpoint {endpoint!r}", field="endpoint")
        return [endpoint]

    async def set_version(self, version: str | None, endpoint: str | None) -> dict[str, Any]:
        for name in self._named(endpoint):
            self.gates[name].set_version(version)
        return self.snapshot()

    async def pause(self, mode: PauseMode, endpoint: str | None) -> dict[str, Any]:
        cut = 0
        #: each endpoint this call paused: its mode before, and its addresses the
        #: engine paused (what a failure undoes)
        changed: list[tuple[str, PauseMode | None, list[str]]] = []
        try:
            for name in self._named(endpoint):
                ep, gate = self._endpoints[name], self.gates[name]
                engine, engine_paused = ep.forward_pause, list[str]()
                changed.append((name, gate.mode, engine_paused))
                cut += await gate.pause(mode, cut=engine is None)
                # a resume while the gateway drained ended this pause: the engine is not
                # to be paused after it
                if engine is not None and gate.paused:
                    send = partial(forward_pause, engine=engine, mode=mode)
                    await self._each_address(ep, send, done=engine_paused)
        except BaseException:
            # a failed pause is undone whole: the gateway does not stay paused, nor do
            # the engines (or replicas) that did pause, all or nothing
            await self._undo(changed)
            raise
        return {**self.snapshot(), "cut": cut}

    async def _undo(self, changed: list[tuple[str, PauseMode | None, list[str]]]) -> None:
        for name, before, engine_paused in reversed(changed):
            ep, gate = self._endpoints[name], self.gates[name]
            if before is not None:  # it was paused already: it stays so, as it was
                gate.mode = before
                continue
            try:
                if ep.forward_pause is not None and engine_paused:
                    send = partial(forward_resume, engine=ep.forward_pause)
                    await self._each_address(ep, send, only=engine_paused)
            except ForwardPauseError as exc:  # the pause's own error is the answer
                log.warning("endpoint %r: undoing a failed pause: %s", name, exc.message)
            finally:
                gate.resume()

    async def resume(self, endpoint: str | None) -> dict[str, Any]:
        for name in self._named(endpoint):
            ep, gate = self._endpoints[name], self.gates[name]
            engine = ep.forward_pause
            if engine is not None and gate.paused:
                await self._each_address(ep, partial(forward_resume, engine=engine))
            gate.resume()
        return self.snapshot()

    async def _each_address(
        self, ep: EndpointConfig, send: Callable[[RelayClient], Awaitable[None]], *,
        done: list[str] | None = None, only: Sequence[str] | None = None,
    ) -> None:  # fmt: skip
        """``send`` on the model client of each of ``ep``'s addresses (of ``only`` those,
        when given); each that took it is added to ``done``."""
        try:
            credential = ep.resolve_credential()
        except ConfigError:  # rollouts bring their own keys: the engine is asked without one
            credential = None
        for url in ep.replica_urls if only is None else only:
            at = ep.for_replica(url) if ep.replicas else ep
            lease = await self._borrow(at, credential)
            try:
                await send(lease.client)
            finally:
                lease.release()
            if done is not None:
                done.append(url)
