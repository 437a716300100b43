"""The supervisor: admits batches, places rollouts on workers, routes their results.

Admission is all or nothing and never queues: a batch is placed, rollout by rollout, on
the least-loaded ready worker with room (each runs at most ``max_inflight``), or
refused at once with the retryable ``429 service_full``. Every rollout resolves exactly
once — its worker's result, or ``worker_lost`` when its worker dies or stops answering
(stored, then reported), or ``cancelled`` when a drain runs out of time — so a caller
reading its batch always reaches the end.

>>> async def main(config: ServeConfig, specs: list[RolloutSpec]) -> None:  # doctest: +SKIP
...     async with Supervisor(config) as supervisor:
...         batch = await supervisor.submit(specs)
...         async for result in batch.results():
...             print(result)
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

from rolltap.errors import RolloutNotFoundError, ServiceFullError, StoreError
from rolltap.otel import otel_enabled
from rolltap.serve.config import ServeConfig
from rolltap.serve.launch.child_process import Launcher, ProcessLauncher
from rolltap.serve.outcomes import store_lost, terminal_result
from rolltap.serve.protocol import ChannelClosedError, Msg, RolloutSpec, WorkerConfig
from rolltap.serve.supervisor.admission import RunLeases, check_batch, ensure_run, place
from rolltap.serve.supervisor.placement import Batch, Job, RecentResults, WorkerHandle, new_id
from rolltap.serve.supervisor.policy_fanout import ServicePolicy
from rolltap.serve.supervisor.shipped_store_host import ShippedStoreHost
from rolltap.serve.supervisor.store_admission import StoreAdmission
from rolltap.serve.supervisor.worker_slots import WorkerSlots
from rolltap.store import Store, WriterHooks, mask_url, resolve_store_url

__all__ = ["Supervisor"]

log = logging.getLogger("rolltap.serve.supervisor")

#: how long cancelled rollouts get to unwind before their workers are killed
CANCEL_GRACE_S = 15.0


class Supervisor:
    """Workers, batches and the store, behind :meth:`submit` and :meth:`drain`."""

    def __init__(self, config: ServeConfig, *, store_hooks: WriterHooks | None = None) -> None:
        """``store_hooks``: for tests only, fault injection into the supervisor's store
        writer (the one writer on SQLite, where the workers ship their writes to it)."""
        self.config = config
        self._store_hooks = store_hooks
        # decided once, here: a missing extra is the caller's error, not each worker's
        self._otel = otel_enabled(config.otel)
        self.batches: dict[str, Batch] = {}
        self.jobs: dict[str, Job] = {}
        self.recent = RecentResults()
        self.statuses: Counter[str] = Counter()
        self.rejected = self.commit_failures = 0  # commit_failures: rollouts left unstored
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._stack = AsyncExitStack()
        self._store: Store | None = None
        self._leases: RunLeases  # set by start()
        self._store_admission: StoreAdmission  # set by start()
        self._worker_slots: WorkerSlots | None = None
        #: the trainer's policy versions and pauses, applied to every worker
        self.policy = ServicePolicy(
            config.endpoints, lambda: self.worker_slots.ready(),
            max_staleness=config.gateway.max_staleness,
            rollouts_per_version=config.gateway.rollouts_per_version,
        )  # fmt: skip
        self._closed = False

    async def __aenter__(self) -> Supervisor:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def store(self) -> Store:
        assert self._store is not None, "the supervisor is not started"
        return self._store

    @property
    def worker_slots(self) -> WorkerSlots:
        assert self._worker_slots is not None, "the supervisor is not started"
        return self._worker_slots

    async def start(self) -> None:
        """Open the store and start the workers; returns once every worker is ready."""
        try:
            self._store = await self._stack.enter_async_context(
                await Store.open(
                    self.config.store,
                    hooks=self._store_hooks,
                    reconnect_timeout=self.config.store_unavailable_timeout_s,
                )
            )
            # released after the workers stop (the stack unwinds backwards)
            self._leases = await self._stack.enter_async_context(
                RunLeases(self._store, self.config.lease_ttl_s)
            )
            launcher, workers = await self._launcher()
            tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
            store_host = ShippedStoreHost(self._store) if self._store.backend == "sqlite" else None
            self._worker_slots = WorkerSlots(
                workers=workers, launcher=launcher, worker_config=self._worker_config, owner=self,
                store_host=store_host, tasks=tasks,
                heartbeat_timeout_s=self.config.heartbeat_timeout_s,
                start_timeout_s=self.config.start_timeout_s,
            )  # fmt: skip
            self._stack.push_async_callback(self._stop_worker_slots)
            self._store_admission = StoreAdmission(self._store, self._worker_store_states)
            self._stack.callback(tasks.create_task(self._store_admission.watch()).cancel)
            await self._worker_slots.start()
        except BaseException:
            await self.aclose()
            raise

    async def _launcher(self) -> tuple[Launcher, int]:
        """How the workers start, and how many; a Ray launcher is closed after them."""
        if self.config.ray is None:
            return ProcessLauncher(), self.config.workers
        from rolltap.serve.launch.ray_actor import RayLauncher  # the extra, only when asked for

        launcher = RayLauncher(
            self.config.ray, workers=self.config.workers,
            workers_per_node=self.config.workers_per_node,
            place_timeout_s=self.config.start_timeout_s,
            working_dir=self.config.ray_working_dir,
        )  # fmt: skip
        ray_launcher = await self._stack.enter_async_context(launcher)
        return ray_launcher, ray_launcher.workers

    async def own_run(self, run_id: str) -> int:
        """Hold ``run_id``'s lease (taking it over from an owner that left it); its epoch.
        What a driver calls before it plans a resume of the run."""
        return await self._leases.own(run_id)

    def room(self) -> int:
        """How many more rollouts the ready workers can take now."""
        return sum(max(0, self.config.max_inflight - h.load) for h in self.worker_slots.ready())

    async def aclose(self) -> None:
        """Cancel what still runs, stop the workers, flush the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._stack.aclose()

    async def _stop_worker_slots(self) -> None:
        await self.drain(0.0)
        await self.worker_slots.shutdown()

    def _worker_store_states(self) -> list[dict[str, Any]]:
        return [handle.store_state for handle in self.worker_slots.ready()]

    def _worker_config(self, index: int) -> WorkerConfig:
        shipped = self.store.backend == "sqlite"
        # the service counts the rollouts that begin (ServicePolicy.admit), not each worker
        gateway = self.config.gateway.model_copy(
            update={"discard_intercepts": self.config.discard_intercepts,
                    "rollouts_per_version": None}
        )  # fmt: skip
        return WorkerConfig(
            index=index, endpoints=self.config.endpoints, gateway=gateway,
            store_url=None if shipped else resolve_store_url(self.config.store),
            stats_interval_s=self.config.stats_interval_s,
            max_rollout_s=self.config.max_rollout_s, trim=self.config.trim,
            test_hooks=self.config.test_hooks, otel=self._otel,
            otel_content=self.config.otel_content,
            store_unavailable_timeout_s=self.config.store_unavailable_timeout_s,
            unsaved_dir=self.config.unsaved_dir,
            preload_harnesses=self.config.preload_harnesses,
        )  # fmt: skip

    # -- admission ---------------------------------------------------------------------

    async def submit(
        self,
        specs: Sequence[RolloutSpec],
        *,
        run_id: str | None = None,
        run_name: str | None = None,
        attempts: Sequence[tuple[int, str | None]] | None = None,
    ) -> Batch:
        """Admit ``specs`` as one batch and dispatch them; read ``batch.results()``.
        ``attempts``: each spec's (attempt, the session it repeats), for an eval's retry.

        Raises ``ServiceFullError`` (429, retryable) when the workers lack room for the
        whole batch or it would run too far ahead of the trainer (``max_staleness`` with
        ``rollouts_per_version``: :meth:`ServicePolicy.admit`), ``ServiceDrainingError``
        (503) once a drain has begun, ``StoreUnavailableError`` (503, retryable) while
        the store cannot take new sessions and ``StoreFullError`` (507) for a while
        after it ran out of space (the rollouts in flight go on).
        """
        check_batch(self.config, specs, closed=self.draining or self._closed)
        await self._store_admission.admit()
        try:
            handles = place(self.worker_slots.ready(), len(specs), self.config.max_inflight)
            self.policy.admit(self._per_endpoint(specs))
        except ServiceFullError:
            self.rejected += 1
            raise
        batch = Batch(new_id(), run_id or new_id())
        deadline = asyncio.get_running_loop().time() + self.config.max_rollout_s
        # its writes may wait out an outage, up to the store's timeout, before it reports
        deadline += max(60.0, 2 * self.config.heartbeat_timeout_s)
        deadline += self.config.store_unavailable_timeout_s
        links = attempts or [(0, None)] * len(specs)
        for spec, handle, (attempt, retry_of) in zip(specs, handles, links, strict=True):
            job = Job(new_id(), batch, spec, spec.to_task(), handle, deadline,
                      attempt=attempt, retry_of=retry_of)  # fmt: skip
            batch.jobs[job.id] = handle.jobs[job.id] = self.jobs[job.id] = job
        self.batches[batch.id] = batch
        self._idle.clear()
        try:
            await ensure_run(self.store, batch.run_id, run_name, given=run_id is not None)
            batch.epoch = await self._leases.own(batch.run_id)
        except BaseException:
            self._withdraw(batch)
            raise
        for job in batch.jobs.values():
            if not job.done:
                try:
                    await job.worker.send(job.submit_frame())
                except ChannelClosedError:
                    continue  # its worker is dying: the loss settles this rollout
        return batch

    def _per_endpoint(self, specs: Sequence[RolloutSpec]) -> dict[str, int]:
        default = self.config.endpoints[0].name
        return dict(Counter(spec.endpoint or default for spec in specs))

    def _withdraw(self, batch: Batch) -> None:
        for job in batch.jobs.values():
            job.worker.jobs.pop(job.id, None)
            self.jobs.pop(job.id, None)
        self.batches.pop(batch.id, None)
        if not self.jobs:
            self._idle.set()

    # -- cancellation and drain --------------------------------------------------------

    def cancel(self, rollout_id: str) -> bool:
        """Ask the rollout's worker to stop it (it ends ``cancelled``); False if unknown."""
        job = self.jobs.get(rollout_id)
        if job is None:
            return False
        job.cancel_requested = True
        channel = job.worker.channel
        if channel is not None and job.worker.state == "ready":
            try:
                channel.send_nowait({"type": Msg.CANCEL, "job": job.id})
            except ChannelClosedError:
                return True  # its worker is dying: the loss settles this rollout
        return True

    def cancel_batch(self, batch_id: str) -> int:
        """Cancel every unfinished rollout of a batch; how many (404 if unknown)."""
        batch = self.batches.get(batch_id)
        if batch is None:
            raise RolloutNotFoundError(f"no running batch {batch_id!r}")
        return sum(self.cancel(job.id) for job in list(batch.jobs.values()) if not job.done)

    def cancel_all(self) -> int:
        return sum(self.cancel(job_id) for job_id in list(self.jobs))

    async def drain(self, grace_s: float | None = None) -> bool:
        """Admit nothing more, wait ``grace_s``, cancel the rest; False if any were left."""
        self.draining = True
        grace_s = self.config.drain_timeout_s if grace_s is None else grace_s
        if await self._wait_idle(grace_s):
            return True
        self.cancel_all()
        if not await self._wait_idle(CANCEL_GRACE_S):
            for handle in {job.worker for job in self.jobs.values()}:
                self.worker_slots.lose(
                    handle, "did not stop its rollouts in time", status="cancelled"
                )
            await self._idle.wait()
        return False

    async def _wait_idle(self, limit_s: float) -> bool:
        try:
            async with asyncio.timeout(limit_s):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    # -- results -----------------------------------------------------------------------

    def on_result(self, handle: WorkerHandle, message: dict[str, Any]) -> None:
        job = handle.jobs.get(str(message.get("job")))
        if job is not None:
            handle.finished += 1
            self._resolve(job, message["result"])

    def on_ready(self, handle: WorkerHandle) -> None:
        self.policy.on_ready(handle)

    def on_policy_reply(self, handle: WorkerHandle, message: dict[str, Any]) -> None:
        self.policy.on_reply(handle, message)

    def on_gone(self, handle: WorkerHandle) -> None:
        self.policy.on_lost(handle)

    async def on_lost(self, handle: WorkerHandle, status: str, reason: str) -> None:
        jobs = [job for job in handle.jobs.values() if not job.done]
        errors: dict[str, str] = {}
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(self._store_lost(job, status, reason, errors))
        for job in jobs:
            error = reason + (f"; store: {errors[job.id]}" if job.id in errors else "")
            self._resolve(job, terminal_result(job.task, job.spec.sample, job.id, status, error))

    async def _store_lost(self, job: Job, status: str, reason: str, errors: dict[str, str]) -> None:
        if self.worker_slots.store_host is not None:
            self.worker_slots.store_host.drop(job.id)
        try:
            await store_lost(
                self.store, run_id=job.batch.run_id, session_id=job.id, task=job.task,
                sample=job.spec.sample, user=job.spec.user, status=status, error=reason,
                attempt=job.attempt, retry_of=job.retry_of,
            )  # fmt: skip
        except StoreError as err:
            log.warning("could not store %s for %s: %s", status, job.id, err)
            errors[job.id] = err.message
            self.commit_failures += 1

    def _resolve(self, job: Job, result: dict[str, Any]) -> None:
        if job.done:
            return
        job.done = True
        job.worker.jobs.pop(job.id, None)
        self.jobs.pop(job.id, None)
        full = {**result, "id": job.id, "batch": job.batch.id, "run_id": job.batch.run_id}
        full["worker"] = job.worker.index
        self.recent.add(full)
        self.statuses[str(full.get("status"))] += 1
        self.commit_failures += str(full.get("error_code") or "").startswith("store")
        job.batch.deliver(full)
        if job.batch.finished:
            self.batches.pop(job.batch.id, None)
        if not self.jobs:
            self._idle.set()

    # -- views -------------------------------------------------------------------------

    def rollout(self, rollout_id: str) -> dict[str, Any]:
        """Where a rollout stands: running (on which worker) or finished (its result)."""
        job = self.jobs.get(rollout_id)
        if job is not None:
            return {
                "id": job.id,
                "batch": job.batch.id,
                "state": "running",
                "worker": job.worker.index,
                "cancel_requested": job.cancel_requested,
            }
        result = self.recent.get(rollout_id)
        if result is None:
            raise RolloutNotFoundError(f"no rollout {rollout_id!r} (or it finished long ago)")
        return {"id": rollout_id, "batch": result["batch"], "state": "finished", "result": result}

    def store_state(self) -> dict[str, Any]:
        """Whether the store takes new rollouts, and what every writer holds meanwhile
        (the supervisor's and each ready worker's: :meth:`StoreAdmission.state`)."""
        return self._store_admission.state()

    def status(self) -> dict[str, Any]:
        """The service at a glance (``GET /status``, and the metrics)."""
        slots = self.worker_slots
        workers = [h.describe() for h in slots.slots if h is not None]
        ready = slots.ready()
        return {
            "state": "draining" if self.draining else "running",
            "workers": workers,
            "ready_workers": len(ready),
            "capacity": len(ready) * self.config.max_inflight,
            "inflight": len(self.jobs),
            "batches": len(self.batches),
            "restarts": slots.restarts,
            "workers_lost": slots.lost,
            "rejected_full": self.rejected,
            "results": dict(self.statuses),
            "store": {
                "backend": self.store.backend,
                "url": mask_url(self.store.url),
                **self.store_state(),
            },
        }
