"""The Ray launcher: each worker slot is an async Ray actor on some node of a cluster.

The actor runs the same worker as a child process does (:func:`serve_channel`); its
channel is a TCP connection it opens back to the driver, which listens on its node's
address and accepts only the one-time ticket it gave that slot (the worker's config,
store URL included, is sent only after). So a worker's gateway, pool and harnesses live
on the worker's own node — harness → gateway traffic never crosses nodes — and the
supervisor's loss detection (end of stream, missed heartbeats) is the same for both.

Placement: one placement group of ``workers`` one-bundle slots, strategy ``SPREAD``
(slots spread evenly over the nodes that have room; a restarted actor returns to its
bundle). Actors restart forever (``max_restarts=-1``) but their calls are never
retried (``max_task_retries=0``): a rollout has side effects, so Ray never re-runs one
— the rollouts of a lost actor end ``worker_lost`` and the restarted actor gets new
work. Only Ray's public API is used; ``ray`` is imported only when this module is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from rolltap.errors import ClusterError, MissingExtraError

try:
    import ray
    from ray.exceptions import RayActorError, RayError
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
except ImportError as exc:  # pragma: no cover - the extra is part of dev
    raise MissingExtraError.for_extra("ray", "ray") from exc

from rolltap.proc.gc_tuning import tune_gc_for_gateway
from rolltap.serve.launch.child_process import WorkerProcess, worker_env
from rolltap.serve.protocol import Channel, ChannelClosedError, Msg
from rolltap.serve.worker.process import serve_channel

__all__ = ["RayLauncher", "RayWorker"]

log = logging.getLogger("rolltap.serve.ray")

#: a local cluster started for one run listens on loopback only (nothing leaves the machine)
_LOCAL_HOST = "127.0.0.1"
#: how long a connecting actor has to present its ticket
_HELLO_TIMEOUT_S = 30.0
#: how long a killed actor's end is awaited before it is presumed lost
_KILL_WAIT_S = 30.0


class RayWorker:
    """One worker slot, as an async Ray actor (the worker runs on the actor's loop)."""

    def __init__(self) -> None:
        tune_gc_for_gateway()

    async def run(self, host: str, port: int, ticket: str) -> int:
        """Connect back to the driver and be a worker until it says stop (or is gone)."""
        reader, writer = await asyncio.open_connection(host, port, limit=2**20)
        channel = Channel(reader, writer)
        await channel.send({"type": Msg.HELLO, "ticket": ticket})
        await serve_channel(channel, node=ray.get_runtime_context().get_node_id())
        return 0


class _ActorProcess:
    """What the supervisor holds of one actor generation: its ``run`` call."""

    def __init__(self, actor: Any, call: asyncio.Future[Any]) -> None:
        self._actor, self._call = actor, call
        self.exit_detail: str | None = None
        self._killed = False

    @property
    def pid(self) -> int | None:
        return None  # the worker's ready frame says (the handle keeps it)

    @property
    def alive(self) -> bool:
        return not self._call.done()

    def kill(self) -> None:
        if self.alive:
            # Ray restarts the actor (max_restarts=-1); its next ``run`` is new work
            self._killed = True
            ray.kill(self._actor, no_restart=False)

    def describe_exit(self, code: int | None) -> str:
        return self.exit_detail or f"actor returned {code}"

    async def wait(self) -> int | None:
        try:
            # an actor on an unreachable node (ActorUnavailableError) may never answer
            # the kill: past a bound it is presumed lost, and its late writes are refused
            async with asyncio.timeout(_KILL_WAIT_S if self._killed else None):
                return int(await asyncio.shield(self._call))
        except TimeoutError:
            self.exit_detail = f"actor unreachable {_KILL_WAIT_S:g} s after its kill"
            return None
        except RayActorError as err:
            self.exit_detail = f"actor died: {type(err).__name__}"
            return None
        except RayError as err:
            self.exit_detail = f"actor failed: {type(err).__name__}: {err}"
            return None


class RayLauncher:
    """Starts worker slots as actors on a Ray cluster; an async context manager.

    ``address``: ``local`` starts a one-machine cluster for the run (loopback only),
    ``auto`` joins the running one, anything else is a cluster address. ``workers``
    slots in all, or ``workers_per_node`` on each alive node; each reserves
    ``cpus_per_worker`` logical CPUs. ``place_timeout_s`` bounds how long the cluster
    may take to find room for every slot (then ``cluster_unavailable``). ``working_dir``
    (Ray's runtime_env) is uploaded to every node: harness modules in it import there.
    """

    kind = "ray"

    def __init__(
        self,
        address: str,
        *,
        workers: int,
        workers_per_node: int | None = None,
        cpus_per_worker: float = 1.0,
        place_timeout_s: float = 120.0,
        working_dir: str | None = None,
    ) -> None:
        self.address = address
        self._working_dir = working_dir
        self.workers = workers
        self._per_node, self._cpus = workers_per_node, cpus_per_worker
        self._place_timeout_s = place_timeout_s
        self._started_ray = False
        self._server: asyncio.Server | None = None
        self._host, self._port = _LOCAL_HOST, 0
        self._pg: Any = None
        self._actors: dict[int, Any] = {}
        self._waiting: dict[str, asyncio.Future[Channel]] = {}
        self._calls: set[asyncio.Future[Any]] = set()

    async def __aenter__(self) -> RayLauncher:
        try:
            await asyncio.to_thread(self._connect)
            self._host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
            self._server = await asyncio.start_server(self._accept, self._host, 0, limit=2**20)
            self._port = self._server.sockets[0].getsockname()[1]
            if self._per_node is not None:
                nodes = ray.nodes()  # type: ignore[no-untyped-call]
                self.workers = self._per_node * sum(1 for node in nodes if node["Alive"])
            await self._place()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _connect(self) -> None:
        if ray.is_initialized():
            return  # the caller's own connection (a trainer's driver) is used as it is
        # the workers import what the driver can (harnesses by module:function); a
        # working directory is uploaded to every node and is the actors' cwd and path
        env: dict[str, Any] = {"env_vars": {"PYTHONPATH": worker_env()["PYTHONPATH"]}}
        if self._working_dir is not None:
            env["working_dir"] = self._working_dir
        options: dict[str, Any] = {
            "include_dashboard": False, "log_to_driver": False, "runtime_env": env,
            # (Ray's own notes, e.g. that it leaves SIGTERM to us, are not the user's business)
            "logging_level": logging.ERROR,
        }  # fmt: skip
        try:
            if self.address == "local":
                # "local" (not None): never join a cluster found on the machine
                ray.init(address="local", **options, _node_ip_address=_LOCAL_HOST)
            else:
                ray.init(address=self.address, **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterError(f"cannot join the Ray cluster at {self.address!r}: {exc}") from exc
        self._started_ray = True

    async def _place(self) -> None:
        bundles = [{"CPU": self._cpus} for _ in range(self.workers)]
        self._pg = placement_group(bundles, strategy="SPREAD")
        try:
            async with asyncio.timeout(self._place_timeout_s):
                await self._pg.ready()
        except TimeoutError:
            cpus = ray.cluster_resources().get("CPU", 0)  # type: ignore[no-untyped-call]
            raise ClusterError(
                f"the cluster could not place {self.workers} workers × {self._cpus:g} CPU "
                f"within {self._place_timeout_s:g} s (it has {cpus:g} CPUs in all)"
            ) from None

    def _actor(self, index: int) -> Any:
        actor = self._actors.get(index)
        if actor is None:
            strategy = PlacementGroupSchedulingStrategy(
                placement_group=self._pg, placement_group_bundle_index=index
            )
            remote = ray.remote(RayWorker).options(
                num_cpus=self._cpus, max_restarts=-1, max_task_retries=0,
                scheduling_strategy=strategy, max_concurrency=4,
            )  # fmt: skip
            actor = self._actors[index] = remote.remote()
        return actor

    async def start(self, index: int, generation: int) -> tuple[WorkerProcess, Channel]:
        """Ask slot ``index``'s actor (created on first use) to run a worker; returns
        once it has connected back."""
        ticket = secrets.token_urlsafe(24)
        connected: asyncio.Future[Channel] = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = connected
        ref = self._actor(index).run.remote(self._host, self._port, ticket)
        call = asyncio.wrap_future(ref.future())
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)
        process = _ActorProcess(self._actors[index], call)
        try:
            done, _ = await asyncio.wait({connected, call}, return_when=asyncio.FIRST_COMPLETED)
            if connected not in done:
                await process.wait()
                raise ClusterError(f"worker {index}'s actor ended before connecting: "
                                   f"{process.exit_detail or 'no error'}")  # fmt: skip
            return process, connected.result()
        finally:
            self._waiting.pop(ticket, None)
            if not connected.done():
                connected.cancel()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = Channel(reader, writer)
        try:
            async with asyncio.timeout(_HELLO_TIMEOUT_S):
                hello = await channel.recv()
        except (TimeoutError, ChannelClosedError):
            hello = None
        ticket = hello.get("ticket") if hello and hello.get("type") == Msg.HELLO else None
        waiting = self._waiting.pop(ticket, None) if isinstance(ticket, str) else None
        if waiting is None or waiting.done():
            log.warning("refused a worker connection without a valid ticket")
            await channel.aclose()
            return
        waiting.set_result(channel)

    async def aclose(self) -> None:
        """Stop listening, kill the actors, free the placement group; leave a cluster
        we joined running (and shut down one we started). Idempotent."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for actor in self._actors.values():
            with contextlib.suppress(RayError):
                ray.kill(actor, no_restart=True)
        self._actors.clear()
        for call in list(self._calls):
            call.cancel()
        if self._pg is not None:
            with contextlib.suppress(RayError):
                remove_placement_group(self._pg)
            self._pg = None
        if self._started_ray:
            self._started_ray = False
            await asyncio.to_thread(ray.shutdown)
