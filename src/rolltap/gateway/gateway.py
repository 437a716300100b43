"""The gateway: one per process. It owns the model-client pool and an elastic set of
servers, registers rollouts and places each on the least-loaded server.

>>> async def main() -> None:  # doctest: +SKIP
...     endpoint = EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="gemma")
...     async with Gateway(endpoint) as gateway:
...         rollout = await gateway.register(user="alice")
...         # point an OpenAI SDK at gateway.describe(rollout)["openai_base_url"]
...         await gateway.unregister(rollout.id)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from rolltap.clients.kinds import upstream_for
from rolltap.clients.relay import RelayClient
from rolltap.clients.token_upstream import renderer_config
from rolltap.clients.tokenizer_check import check_tokenizer
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import (
    ConfigError,
    GatewayClosedError,
    RolloutClosedError,
    RolloutNotFoundError,
    RolltapError,
    SessionExistsError,
)
from rolltap.gateway.admin import add_admin_routes
from rolltap.gateway.context import GatewayContext
from rolltap.gateway.harness import add_harness_routes
from rolltap.gateway.limits import InflightLimiter, RolloutLimits
from rolltap.gateway.observer import CallTracer, RolloutAdmitter, RolloutObserver
from rolltap.gateway.pinning import EndpointReplicas, ReplicaPin
from rolltap.gateway.policies import EndpointPolicies
from rolltap.gateway.policy import PauseMode
from rolltap.gateway.rollout import Rollout, new_rollout_id, new_secret, session_id_of
from rolltap.gateway.server import GatewayServer
from rolltap.gateway.stats import GatewayStats
from rolltap.http.auth import AuthThrottle
from rolltap.pool import Lease, ModelClientPool
from rolltap.proc.memory import Trimmer
from rolltap.tokens import RendererPool, RendererRegistry
from rolltap.tokens.parsers import resolve_parser

__all__ = ["Gateway"]

log = logging.getLogger("rolltap.gateway")

_DRAIN_TIMEOUT_S = 10.0


class Gateway:
    """Owns model clients (through its pool) and the servers rollouts talk to."""

    def __init__(
        self,
        endpoints: EndpointConfig | Sequence[EndpointConfig],
        settings: GatewaySettings | None = None,
        *,
        pool: ModelClientPool[RelayClient] | None = None,
        observers: Sequence[RolloutObserver] = (),
        tracer: CallTracer | None = None,
        replica_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``replica_clock`` times replicas' cool-offs (tests move it instead of waiting)."""
        eps = [endpoints] if isinstance(endpoints, EndpointConfig) else list(endpoints)
        self._endpoints, self._limiters, self._replicas = _endpoint_tables(eps, replica_clock)
        self._default_endpoint = eps[0]
        self.settings = settings or GatewaySettings.from_env()
        self.admin_token = self.settings.admin_token or secrets.token_urlsafe(24)
        self.admin_token_generated = self.settings.admin_token is None
        #: failed authentications (admin token, rollout secrets) counted per peer
        self.auth_throttle = AuthThrottle(self.settings.auth_failures_per_minute)
        self._own_pool = pool is None
        self.pool: ModelClientPool[RelayClient] = pool or ModelClientPool(
            max_clients=self.settings.max_model_clients
        )
        self.stats = GatewayStats()
        #: each endpoint's policy version and pauses (the trainer's ``/policy``, ``/pause``)
        self.policies = EndpointPolicies(eps, self.settings, self._policy_borrow)
        #: sees every rollout (as an observer) and every ended call: spans, when given
        self.tracer = tracer
        self.observers = [*observers, *([] if tracer is None else [tracer])]
        #: what the servers and the harness routes are handed (the admin routes alone get
        #: the gateway itself, as an :class:`~rolltap.gateway.admin.Admin`)
        self.context = GatewayContext(
            self.settings, self.stats, self.auth_throttle, self.observers, tracer
        )
        self._servers: list[GatewayServer] = []
        self._rollouts: dict[str, Rollout] = {}
        #: the session ids of live rollouts (and of registrations under way)
        self._sessions: set[str] = set()
        self._place_lock = asyncio.Lock()
        self._reap_wakeup = asyncio.Event()
        #: the gateway's own tasks (idle-server reaper, memory trims): cancelled on close
        self._background: list[asyncio.Task[None]] = []
        #: returns freed allocator pages to the OS on ``settings.trim_interval_s``
        self.trimmer = Trimmer() if self.settings.trim_interval_s > 0 else None
        # Token endpoints render with it; it imports nothing heavy until one is used.
        self.renderers = RendererRegistry()
        #: False once a shutdown gave up waiting for open rollouts' calls to unwind
        self.drained = True
        self._state = "new"

    # -- lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._state != "new":
            raise GatewayClosedError(f"gateway cannot start from state {self._state!r}")
        self._state = "starting"
        try:
            await self.renderers.__aenter__()
            for endpoint in self._endpoints.values():
                if endpoint.client == "tokens":
                    # an unknown parser, or Harmony mixed with another, fails the start
                    resolve_parser(endpoint.tool_parser, endpoint.reasoning_parser)
                    # the first renderer loads while the caller sets up (seed 001's cold start)
                    self.renderers.shared(renderer_config(endpoint))
            await self._start_server(admin=True, port=self.settings.port)
        except BaseException:
            await self.aclose()
            raise
        loop = asyncio.get_running_loop()
        self._background.append(
            loop.create_task(self._reap_idle_servers(), name="rolltap-gateway-reaper")
        )
        if self.trimmer is not None:
            trims = self.trimmer.trim_forever(self.settings.trim_interval_s)
            self._background.append(loop.create_task(trims, name="rolltap-gateway-trim"))
        self._state = "running"

    async def aclose(self) -> None:
        """Unregister every rollout, close the servers, then the pool. Idempotent."""
        if self._state == "closed":
            return
        self._state = "closed"
        closing = GatewayClosedError("the gateway is shutting down")
        dropped = [self._drop(rollout_id, closing) for rollout_id in list(self._rollouts)]
        try:
            # Unblocked calls answer at once; a harness that stopped reading must not
            # hold shutdown hostage, so the servers' own shutdown cancels stragglers.
            async with asyncio.timeout(_DRAIN_TIMEOUT_S):
                for rollout in dropped:
                    await self._ended(rollout, "cancelled")
        except TimeoutError:
            self.drained = False
            log.warning("gateway shutdown: calls still unwinding after %ss", _DRAIN_TIMEOUT_S)
        for task in self._background:
            task.cancel()
        if self._background:
            await asyncio.wait(self._background)
        self._background.clear()
        for server in self._servers:
            await server.aclose()
        self._servers.clear()
        if not self.renderers.closed:
            await self.renderers.__aexit__(None, None, None)
        if self._own_pool:
            await self.pool.aclose()

    async def ready(self) -> None:
        """Return once every token endpoint can render (its first renderer is built) and
        its server, where it can tokenize, agrees with that tokenizer; raises a build's
        error, or :class:`~rolltap.errors.TokenizerMismatchError`. A relay-only gateway is
        ready at once."""
        for endpoint in self._endpoints.values():
            if endpoint.client == "tokens":
                pool = self.renderers.shared(renderer_config(endpoint))
                await pool.ready()
                await self._check_tokenizer(endpoint, pool)

    async def _check_tokenizer(self, endpoint: EndpointConfig, pool: RendererPool) -> None:
        """Each replica's ``/tokenize`` against the local tokenizer, on the pooled client
        the first rollout will use (its connection warm)."""
        try:
            credential = endpoint.resolve_credential()
        except ConfigError as exc:  # rollouts bring their own keys: nothing to ask with
            log.debug("tokenizer check skipped for %r: %s", endpoint.name, exc.message)
            return
        replicated = bool(endpoint.replicas)
        for url in endpoint.replica_urls:
            at = endpoint.for_replica(url) if replicated else endpoint
            lease = await self._borrow(at, credential, None, "tokenizer-check")
            try:
                async with pool.acquire() as renderer:
                    await check_tokenizer(at, lease.client, renderer)
            finally:
                lease.release()

    # -- addresses -----------------------------------------------------------------

    @property
    def admin_url(self) -> str:
        return self._servers[0].url

    @property
    def servers(self) -> list[GatewayServer]:
        return list(self._servers)

    # -- rollouts ------------------------------------------------------------------

    async def register(
        self,
        *,
        user: str | None = None,
        api_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        endpoint: str | None = None,
        limits: RolloutLimits | None = None,
        sampling: dict[str, Any] | None = None,
    ) -> Rollout:
        """Register a rollout: lease its model client, choose its upstream on it (relay or
        token, :func:`~rolltap.clients.kinds.upstream_for`) and place it on a server.

        ``api_key`` is a per-rollout upstream credential (memory only); without it the
        endpoint's ``api_key_env`` is read. ``limits`` bound the rollout's calls;
        ``sampling`` fields are forced on each of its requests (and recorded). Raises
        ``ModelPoolFullError`` (retryable) when every client slot is leased.
        """
        if self._state != "running":
            raise GatewayClosedError("the gateway is not running")
        ep = self._endpoint(endpoint)
        credential = api_key if api_key is not None else ep.resolve_credential()
        rollout_id = new_rollout_id()
        session_id = session_id_of(metadata or {}, rollout_id)
        if session_id in self._sessions:
            raise SessionExistsError(f"a live rollout records to session {session_id!r}")
        self._sessions.add(session_id)  # held from here: two registrations cannot share it
        lease: Lease[RelayClient] | None = None
        pin: ReplicaPin | None = None
        try:
            pin = self._pin(ep, credential, user, rollout_id)
            if pin is None:
                lease = await self._borrow(ep, credential, user, rollout_id)
            else:
                lease = await pin.borrow(pin.url)
            gate = self.policies.gates[ep.name]
            upstream = upstream_for(ep, lease.client, self.renderers, gate)
            async with self._place_lock:  # choose and place together: least-loaded holds
                server = await self._choose_server()
                rollout = Rollout(
                    id=rollout_id, secret=new_secret(), endpoint=ep, lease=lease,
                    upstream=upstream, server=server, session_id=session_id, user=user,
                    metadata=dict(metadata or {}), limits=limits or RolloutLimits(),
                    sampling=dict(sampling or {}), limiter=self._limiters.get(ep.name), pin=pin,
                    gate=gate,
                )  # fmt: skip
                server.place(rollout)
            await self._admit(rollout)
        except BaseException:
            self._sessions.discard(session_id)
            if lease is not None:
                lease.release()
            if pin is not None:
                pin.unpin()
            raise
        self._rollouts[rollout_id] = rollout
        self.stats.rollouts_registered += 1
        for observer in self.observers:
            observer.rollout_registered(rollout)
        return rollout

    def _pin(
        self, ep: EndpointConfig, credential: str | None, user: str | None, holder: str
    ) -> ReplicaPin | None:
        """Pin a new rollout of ``ep`` to its least-loaded replica (None: ``ep`` has one
        ``base_url``); the pin leases each replica's client under the rollout's identity."""
        replicas = self._replicas.get(ep.name)
        if replicas is None:
            return None

        async def borrow(url: str) -> Lease[RelayClient]:
            at = replicas.endpoint(url)
            return await self._borrow(at, credential, user, holder)

        return ReplicaPin(holder, replicas.set, replicas.set.register(holder), borrow)

    async def _borrow(
        self, ep: EndpointConfig, credential: str | None, user: str | None, holder: str
    ) -> Lease[RelayClient]:
        """The model client for this identity, from the pool (shared, or built once)."""

        async def build() -> RelayClient:
            return RelayClient(ep, credential)

        key = ep.identity(credential=credential, user=user)
        return await self.pool.borrow(key, build, holder=holder)

    async def _policy_borrow(
        self, ep: EndpointConfig, credential: str | None
    ) -> Lease[RelayClient]:
        return await self._borrow(ep, credential, None, "policy")

    # -- policy (a trainer's weight updates) ------------------------------------------

    def policy(self) -> dict[str, Any]:
        """Each endpoint's policy version, pause and counters (``GET /policy``)."""
        return self.policies.snapshot()

    async def set_policy_version(
        self, version: str | None, *, endpoint: str | None = None
    ) -> dict[str, Any]:
        """Make ``version`` the current policy version of ``endpoint`` (None: of every
        endpoint): answers recorded from now on carry it, unless the engine reports its
        own. Returns :meth:`policy`."""
        return await self.policies.set_version(version, endpoint)

    async def pause(self, mode: PauseMode, *, endpoint: str | None = None) -> dict[str, Any]:
        """Pause ``endpoint`` (None: every endpoint): new calls wait, in arrival order, up
        to ``pause_max_s``. ``hold`` lets calls in flight run on, ``drain`` returns once
        none is left, ``abort`` cuts them (:mod:`rolltap.gateway.policy`)."""
        return await self.policies.pause(mode, endpoint)

    async def resume(self, *, endpoint: str | None = None) -> dict[str, Any]:
        """End a pause: held calls go, in the order they arrived."""
        return await self.policies.resume(endpoint)

    async def _admit(self, rollout: Rollout) -> None:
        try:
            for observer in self.observers:
                if isinstance(observer, RolloutAdmitter):
                    await observer.admit_rollout(rollout)
        except BaseException:
            rollout.server.remove(rollout.id)
            raise

    def get(self, rollout_id: str) -> Rollout:
        rollout = self._rollouts.get(rollout_id)
        if rollout is None:
            raise RolloutNotFoundError(f"no rollout {rollout_id!r}")
        return rollout

    def rollouts(self) -> list[Rollout]:
        return list(self._rollouts.values())

    async def unregister(self, rollout_id: str) -> Rollout:
        """End a rollout: undelivered calls get ``rollout_closed`` at once.

        Returns the rollout once its in-flight calls have unwound, so its event log is
        final (each unblocked call has recorded its error).
        """
        rollout = self._drop(rollout_id, RolloutClosedError("the rollout was unregistered"))
        await self._ended(rollout, "completed")
        return rollout

    async def abort(self, rollout_id: str) -> Rollout:
        """Cancel a rollout's in-flight calls and end it; the shared client stays open."""
        rollout = self._drop(rollout_id, RolloutClosedError("the rollout was aborted"))
        await self._ended(rollout, "cancelled")
        return rollout

    async def _ended(self, rollout: Rollout, status: str) -> None:
        await rollout.drained()
        for observer in self.observers:
            observer.rollout_ended(rollout, status)

    def _drop(self, rollout_id: str, error: RolltapError) -> Rollout:
        rollout = self.get(rollout_id)
        del self._rollouts[rollout_id]
        self._sessions.discard(rollout.session_id)
        rollout.server.remove(rollout_id)
        rollout.close(error)
        self._reap_wakeup.set()
        return rollout

    def describe(self, rollout: Rollout, *, secret: bool = True) -> dict[str, Any]:
        """The registration answer: id, secret and the base URLs for each SDK."""
        base = f"{rollout.server.url}/r/{rollout.id}"
        out: dict[str, Any] = {
            "id": rollout.id,
            "base_url": base + "/v1",
            "openai_base_url": base + "/v1",
            "anthropic_base_url": base,
            "user": rollout.user,
            "metadata": rollout.metadata,
        }
        if secret:
            out["api_key"] = rollout.secret
        else:
            out["events"] = len(rollout.log)
            out["intercepts"] = len(rollout.intercepts)
        return out

    def snapshot(self) -> dict[str, Any]:
        return {
            "servers": len(self._servers),
            "rollouts": len(self._rollouts),
            "intercepts": sum(len(r.intercepts) for r in self._rollouts.values()),
            "server_loads": [{"url": s.url, "rollouts": s.load} for s in self._servers],
            "pool": self.pool.snapshot().as_dict(),
            "inflight": {name: lim.snapshot() for name, lim in self._limiters.items()},
            "replicas": {name: reps.snapshot() for name, reps in self._replicas.items()},
            "totals": self.stats.as_dict(),
            "policy": self.policies.snapshot()["endpoints"],
        }

    # -- servers -------------------------------------------------------------------

    def _endpoint(self, name: str | None) -> EndpointConfig:
        if name is None:
            return self._default_endpoint
        try:
            return self._endpoints[name]
        except KeyError:
            raise ConfigError(f"unknown endpoint {name!r}") from None

    async def _choose_server(self) -> GatewayServer:
        """Least-loaded server with room, else a new one. Called under the place lock."""
        limit = self.settings.multiplex
        open_servers = [s for s in self._servers if s.load < limit]
        if open_servers:
            return min(open_servers, key=lambda s: s.load)
        return await self._start_server(admin=False, port=0)

    async def _start_server(self, *, admin: bool, port: int) -> GatewayServer:
        server = GatewayServer(self.context, max_body_bytes=self.settings.max_body_bytes)
        add_harness_routes(server.app)
        if admin:
            add_admin_routes(server.app, self, endpoints=list(self._endpoints))
        try:
            await server.start(self.settings.host, port, self.settings.public_host)
        except OSError as exc:
            await server.aclose()
            raise ConfigError(f"cannot listen on {self.settings.host}:{port}: {exc}") from exc
        self._servers.append(server)
        log.debug("gateway server %d listening on %s", len(self._servers), server.url)
        return server

    async def _reap_idle_servers(self) -> None:
        """Close servers beyond the first once they have been empty for the grace period."""
        grace = self.settings.idle_grace_s
        while True:
            deadlines = [
                s.idle_since + grace for s in self._servers[1:] if s.idle_since is not None
            ]
            delay = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            try:
                async with asyncio.timeout(delay):
                    await self._reap_wakeup.wait()
            except TimeoutError:
                pass
            self._reap_wakeup.clear()
            async with self._place_lock:
                now = time.monotonic()
                for server in self._servers[1:]:
                    if server.idle_since is not None and now - server.idle_since >= grace:
                        self._servers.remove(server)
                        await server.aclose()


def _endpoint_tables(
    eps: Sequence[EndpointConfig], clock: Callable[[], float]
) -> tuple[dict[str, EndpointConfig], dict[str, InflightLimiter], dict[str, EndpointReplicas]]:
    """The gateway's endpoints by name, their in-flight limiters, and their replica sets (an
    endpoint with replicas has no endpoint-wide limiter: its ``max_inflight`` caps each)."""
    if not eps:
        raise ConfigError("a gateway needs at least one endpoint")
    by_name = {ep.name: ep for ep in eps}
    if len(by_name) != len(eps):
        raise ConfigError("endpoint names must be unique")
    limiters = {
        ep.name: InflightLimiter(
            ep.max_inflight, max_queued=ep.max_queued, timeout=ep.inflight_timeout_s
        )
        for ep in eps
        if ep.max_inflight is not None and not ep.replicas
    }
    replicas = {ep.name: EndpointReplicas(ep, clock=clock) for ep in eps if ep.replicas}
    return by_name, limiters, replicas
