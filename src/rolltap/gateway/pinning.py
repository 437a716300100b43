"""Rollouts of a replicated endpoint on their replicas: the gateway's side of a
:class:`~rolltap.clients.replicas.ReplicaSet`.

An endpoint with ``replicas`` gets one :class:`EndpointReplicas` per gateway; each of
its rollouts gets a :class:`ReplicaPin` when it registers, pinned to the least-loaded
replica, its model client leased from the gateway's pool under that replica's identity.
At each call :class:`~rolltap.gateway.call.ModelCall` routes first: a rollout whose
replica is down is re-pinned, its upstream moved onto the new replica's client
(:meth:`ReplicaPin.follow`), and the move recorded as a ``note``. An endpoint with one
``base_url`` has none of this: its calls take the path they always took.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from rolltap.clients.kinds import move_upstream
from rolltap.clients.relay import RelayClient
from rolltap.clients.replicas import ReplicaSet, replica_label
from rolltap.clients.upstream import Upstream
from rolltap.config import EndpointConfig
from rolltap.events import EventKind, EventLog
from rolltap.pool import Lease

__all__ = ["Borrow", "EndpointReplicas", "Pinned", "ReplicaPin"]

#: leases the model client of one replica (its URL) for a rollout's identity
Borrow = Callable[[str], Awaitable[Lease[RelayClient]]]


class Pinned(Protocol):
    """What routing needs of a rollout (a :class:`~rolltap.gateway.rollout.Rollout`)."""

    id: str
    lease: Lease[RelayClient]
    upstream: Upstream[Any]
    log: EventLog


class EndpointReplicas:
    """One replicated endpoint on one gateway: its :class:`ReplicaSet` and the endpoint
    each replica's model client is built from (and keyed by in the pool)."""

    def __init__(
        self, endpoint: EndpointConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.set = ReplicaSet.for_endpoint(endpoint, clock=clock)
        self._endpoints = {url: endpoint.for_replica(url) for url in endpoint.replica_urls}

    def endpoint(self, url: str) -> EndpointConfig:
        """The endpoint at replica ``url`` alone."""
        return self._endpoints[url]

    def snapshot(self) -> dict[str, Any]:
        """Per-replica calls, errors, latency and pinned rollouts (``/stats``)."""
        return self.set.snapshot()


@dataclass(eq=False, slots=True)
class ReplicaPin:
    """Where one rollout's calls go on a replicated endpoint."""

    rollout: str
    replicas: ReplicaSet
    #: the replica its upstream sends through now
    url: str
    borrow: Borrow
    #: leases of replicas it was moved off; a call still in flight there may hold their
    #: client, so they are released with the rollout, not at the move
    retired: list[Lease[RelayClient]] = field(default_factory=list)
    label: str = field(init=False)

    def __post_init__(self) -> None:
        self.label = replica_label(self.url)

    async def route(self, rollout: Pinned) -> str:
        """Before a call records anything: re-pin ``rollout`` if its replica is down (the
        move noted) and follow it there; the label of the replica the call goes to."""
        url, repin = self.replicas.route(rollout.id)
        if repin is not None:
            rollout.log.append(EventKind.NOTE, repin.note())
        if url != self.url:
            await self.follow(rollout, url)
        return self.label

    @asynccontextmanager
    async def slot(self, rollout: Pinned) -> AsyncIterator[None]:
        """A slot among the replica's calls in flight, held for one upstream call; a
        failure to connect marks the replica down (:mod:`rolltap.clients.replicas`)."""
        async with self.replicas.call(rollout.id) as call:
            if call.repin is not None:  # marked down since route(), or reported late
                rollout.log.append(EventKind.NOTE, call.repin.note())
            if call.replica != self.url:
                await self.follow(rollout, call.replica)
            yield

    async def follow(self, rollout: Pinned, url: str) -> None:
        """Move ``rollout``'s upstream onto replica ``url``'s client, leased first: the
        pool's error (``model_pool_full``) leaves everything where it was."""
        moved = await self.borrow(url)
        move_upstream(rollout.upstream, moved.client)
        self.retired.append(rollout.lease)
        rollout.lease = moved
        self.url, self.label = url, replica_label(url)

    def unpin(self) -> None:
        """The rollout ended: its replica stops counting it."""
        self.replicas.release(self.rollout)

    def release(self) -> None:
        """The rollout's calls have unwound: release the leases it was moved off."""
        for lease in self.retired:
            lease.release()
        self.retired.clear()
