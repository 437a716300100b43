"""``rolltap eval`` on workers: the driver of a run whose rollouts run elsewhere.

With ``workers`` (local processes) or ``ray`` (Ray actors) in the run config, the
driver starts a :class:`~rolltap.serve.supervisor.supervisor.Supervisor` with that launcher,
creates (or takes over, on resume) the run, and feeds it the run's rollouts as room
frees up — at most ``c`` in flight in all, split evenly over the workers. Results stream
back into one progress display and one summary, and ``--resume`` and ``--retry-failed``
work as in-process.
A lost worker costs only its rollouts (``worker_lost``); a driver that has work left but
no worker for ``start_timeout_s`` fails the run with ``workers_lost`` instead of waiting.

What ``rolltap.Workers(n)`` and ``rolltap.Ray(address)`` run
(:mod:`rolltap.serve.backends`):

>>> async def main(config: RunConfig) -> None:  # doctest: +SKIP
...     result = await EvalDriver(config.placed({"workers": 2}), Hooks()).run(None)
...     print(result.summary["statuses"])
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError, RolltapError, ServiceFullError, WorkersLostError
from rolltap.otel import otel_enabled
from rolltap.results.attempts import summarize_run
from rolltap.results.rollout import RolloutResult
from rolltap.rollouts.api import (
    LOCAL_SAMPLING,
    Hooks,
    RunResult,
    load_run_tasks,
    report_store,
    run_endpoint,
    store_summary,
)
from rolltap.rollouts.config import RAY_NEEDS_ENDPOINT, RunConfig
from rolltap.rollouts.harness_loader import builtin_harness_names
from rolltap.rollouts.prepare import prepare
from rolltap.rollouts.runner import WorkItem
from rolltap.rollouts.tasks import Task
from rolltap.rollouts.workplan import plan_again
from rolltap.serve.config import ServeConfig
from rolltap.serve.protocol import RolloutSpec
from rolltap.serve.supervisor.placement import Batch
from rolltap.serve.supervisor.supervisor import Supervisor
from rolltap.serve.supervisor.worker_slots import WorkerSlots
from rolltap.store import StoreFullError, StoreUnavailableError, WriterStats

__all__ = ["EvalDriver"]

log = logging.getLogger("rolltap.serve.driver")

#: a rollout's wall clock when the run sets no timeout (workers still need a bound to
#: tell a broken one from a slow one)
_NO_TIMEOUT_S = 7 * 24 * 3600.0


def _ready_count_is_not(count: int) -> Callable[[WorkerSlots], bool]:
    return lambda slots: len(slots.ready()) != count


def _spec(config: RunConfig, item: WorkItem, sampling: dict[str, Any]) -> RolloutSpec:
    options = config.harness_options if config.harness_options.is_set() else None
    return RolloutSpec(
        task=item.task.to_dict(), sample=item.sample, harness=config.harness or "chat",
        harness_options=options, cmd=config.cmd, rewards=list(config.rewards),
        limits=config.limits, sampling=sampling,
    )  # fmt: skip


class EvalDriver:
    """Feeds one run's rollouts to a supervisor's workers (see the module docstring); a
    front end gets it through ``Hooks.on_runner`` (``stop()``, ``workers()``)."""

    def __init__(
        self,
        config: RunConfig,
        hooks: Hooks,
        *,
        tasks: Sequence[Task] | None = None,
        endpoint: EndpointConfig | None = None,
    ) -> None:
        """``tasks`` and ``endpoint`` win over what ``config`` names (as in process)."""
        self.config, self.hooks = config, hooks
        self._tasks, self._endpoint = tasks, endpoint
        self.stopping = False
        self.results: list[RolloutResult] = []
        self._supervisor: Supervisor | None = None
        self._inflight = 0
        #: when each rollout in flight was submitted, seconds into the run (by task, sample)
        self._started: dict[tuple[str, int], float] = {}
        #: each rollout's (attempt, retry_of), by (task, sample): a lost one's result too
        self._links: dict[tuple[str, int], tuple[int, str | None]] = {}
        self._t0 = time.monotonic()
        #: results as they land; ``None``: the workers changed, look for room again
        self._landed: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def workers(self) -> list[dict[str, Any]]:
        """Each worker slot now: index, node, pid, state, load, latest heartbeat."""
        if self._supervisor is None:
            return []
        return [h.describe() for h in self._supervisor.worker_slots.slots if h is not None]

    def stop(self) -> None:
        """Submit nothing more and cancel the rollouts in flight (they end ``cancelled``)."""
        self.stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel_all()

    async def run(self, resume_run: str | None, *, retry_run: str | None = None) -> RunResult:
        """Run the config's rollouts (or finish ``resume_run``, or run the failed rollouts
        of ``retry_run`` again) on the workers; every result and the run's summary."""
        config = self.config
        # harness, rewards, endpoint, extras: before anything starts
        plan = prepare(config, endpoint=self._endpoint)
        if config.ray is not None and plan.endpoint is None:
            raise ConfigError(RAY_NEEDS_ENDPOINT)
        otel_enabled(config.otel)
        tasks, again = None, resume_run or retry_run
        if again is None:
            tasks = list(self._tasks) if self._tasks is not None else load_run_tasks(config)
        async with run_endpoint(config, plan, self.hooks) as endpoint:
            sampling = config.sampling or (LOCAL_SAMPLING if plan.endpoint is None else {})
            if self.hooks.on_stage is not None:
                self.hooks.on_stage("starting the workers…")
            async with Supervisor(self._serve_config(endpoint)) as supervisor:
                self._supervisor = supervisor
                run_id, items, earlier = await self._plan(
                    supervisor, tasks, again, retry=retry_run is not None
                )
                if self.hooks.on_runner is not None:
                    self.hooks.on_runner(self)
                if self.hooks.on_plan is not None:
                    self.hooks.on_plan(run_id, len(items))
                pending = deque(items)
                await self._feed(supervisor, run_id, pending, sampling)
                workers = self.workers()
                everything = earlier + self.results
                summary = summarize_run(everything, r=config.r, policy=config.attempt_policy,
                                        calls_known=not earlier)  # fmt: skip
                if not self.stopping and not pending:
                    await store_summary(supervisor.store, run_id, summary)
        retried = len(self.results) if retry_run else None
        return RunResult(run_id, everything, summary, self.stopping, workers, retried=retried)

    def _serve_config(self, endpoint: EndpointConfig) -> ServeConfig:
        config = self.config
        per_node = config.workers_per_node
        count = config.workers if isinstance(config.workers, int) and config.workers else None
        if config.ray is not None and count is None and per_node is None:
            per_node = 1  # --ray alone: one worker on every node
        workers = count or 1
        # ``c`` is the run's total; placement is least-loaded first, so an even split
        # (with workers per node, their number is known only once the cluster is seen)
        per_worker = config.c if per_node is not None else math.ceil(config.c / workers)
        settings = config.gateway_settings(self.hooks.gateway_settings)
        return ServeConfig.build({
            "workers": workers, "ray": config.ray, "workers_per_node": per_node,
            "ray_working_dir": config.ray_working_dir,
            "endpoints": [endpoint], "store": config.store, "max_inflight": per_worker,
            "max_rollout_s": config.limits.timeout_s or _NO_TIMEOUT_S,
            "lease_ttl_s": config.lease_ttl_s, "otel": config.otel,
            # a run is short next to a service: a fresher heartbeat for the final table
            "stats_interval_s": 2.0, "start_timeout_s": config.worker_start_timeout_s,
            "otel_content": config.otel_content,
            "store_unavailable_timeout_s": config.store_unavailable_timeout_s,
            # the run's own built-in only (a chat run needs not Anthropic's SDK)
            "preload_harnesses": (
                [config.harness] if config.harness in builtin_harness_names() else []
            ),
            **({"gateway": settings} if settings is not None else {}),
        }, source="run config")  # fmt: skip

    async def _plan(
        self, supervisor: Supervisor, tasks: list[Task] | None, again: str | None, *, retry: bool
    ) -> tuple[str, list[WorkItem], list[RolloutResult]]:
        store = supervisor.store
        if again is not None:
            # take the run over first: what a lost owner left is stored interrupted, and
            # its late commits are refused, before the plan deletes and reruns them
            await supervisor.own_run(again)
            items, earlier = await plan_again(store, again, self.config, self._tasks, retry=retry)
            return again, items, earlier
        assert tasks is not None
        doc = {"run": self.config.model_dump(mode="json")}
        run = await store.create_run(self.config.name, doc, set_id=self.config.set_id)
        await supervisor.own_run(run.id)
        return run.id, [WorkItem(t, s) for t in tasks for s in range(self.config.r)], []

    async def _feed(
        self, supervisor: Supervisor, run_id: str, specs: deque[WorkItem], sampling: dict[str, Any]
    ) -> None:
        """Submit as room frees up — a result landed, a worker (re)joined — until every
        rollout has a result, or the run stops."""
        failure: RolltapError | None = None
        async with asyncio.TaskGroup() as group:
            helpers = [group.create_task(self._watch_worker_slots(supervisor))]
            if (report := self.hooks.on_store) is not None:
                stats = functools.partial(self._store_stats, supervisor)
                helpers.append(group.create_task(report_store(stats, report)))
            try:
                while (specs and not self.stopping) or self._inflight:
                    if specs and not self.stopping:
                        batch = await self._submit(supervisor, run_id, specs, sampling)
                        if batch is not None:
                            helpers.append(group.create_task(self._collect(batch)))
                    if self._inflight == 0:
                        if specs and not self.stopping:
                            await self._await_workers(supervisor)
                        continue
                    message = await self._landed.get()
                    if message is not None:
                        self._land(message)
            except RolltapError as err:
                failure = err  # what is in flight is cancelled when the supervisor closes
            for task in helpers:
                task.cancel()
        if failure is not None:  # raised here, not inside a task group's exception group
            raise failure

    async def _watch_worker_slots(self, supervisor: Supervisor) -> None:
        """Wake the feeder whenever the number of ready workers changes."""
        slots = supervisor.worker_slots
        while True:
            await slots.wait_until(_ready_count_is_not(len(slots.ready())))
            await self._landed.put(None)

    @staticmethod
    def _store_stats(supervisor: Supervisor) -> WriterStats:
        """Every writer's state as one (the progress line shows an outage): the driver's
        own writer's counters, the health of all of them (the workers' too, on PostgreSQL
        and MySQL, where each worker writes)."""
        state = supervisor.store_state()
        return dataclasses.replace(
            supervisor.store.stats(), pending_commits=state["pending_commits"],
            pending_bytes=state["pending_bytes"], unavailable_s=state["unavailable_s"],
            full_s=state["full_s"],
        )  # fmt: skip

    async def _submit(
        self, supervisor: Supervisor, run_id: str, specs: deque[WorkItem],
        sampling: dict[str, Any],
    ) -> Batch | None:  # fmt: skip
        room = min(supervisor.room(), self.config.c - self._inflight, len(specs),
                   supervisor.config.max_batch)  # fmt: skip
        if room <= 0:
            return None
        chosen = [specs.popleft() for _ in range(room)]
        links = [(item.attempt, item.retry_of) for item in chosen]
        try:
            batch = await supervisor.submit(
                [_spec(self.config, item, sampling) for item in chosen], run_id=run_id,
                attempts=links,
            )  # fmt: skip
        except (ServiceFullError, StoreUnavailableError, StoreFullError) as err:
            # a worker was lost between counting and placing, or the store is away or full:
            # they go back to the front and are offered again after the next result
            specs.extendleft(reversed(chosen))
            log.info("holding %d rollouts back: %s", len(chosen), err.message)
            if self._inflight == 0:
                await asyncio.sleep(1.0)  # nothing will wake us: poll the service again
            return None
        self._inflight += len(chosen)
        now = time.monotonic() - self._t0
        for item in chosen:
            self._started[(item.task.id, item.sample)] = now
            self._links[(item.task.id, item.sample)] = (item.attempt, item.retry_of)
        return batch

    async def _collect(self, batch: Batch) -> None:
        async for result in batch.results():
            if result is not None:
                await self._landed.put(result)

    def _land(self, message: dict[str, Any]) -> None:
        self._inflight -= 1
        result = RolloutResult.from_wire(message)
        result.started_s = self._started.pop((result.task_id, result.sample), 0.0)
        result.attempt, result.retry_of = self._links.pop(
            (result.task_id, result.sample), (0, None)
        )
        self.results.append(result)
        if self.hooks.on_result is not None:
            self.hooks.on_result(result)

    async def _await_workers(self, supervisor: Supervisor) -> None:
        """Work is left and nothing runs: wait for a worker; ``workers_lost`` if none comes."""
        limit = supervisor.config.start_timeout_s
        try:
            async with asyncio.timeout(limit):
                await supervisor.worker_slots.wait_until(lambda slots: bool(slots.ready()))
        except TimeoutError:
            raise WorkersLostError(
                f"no worker has been ready for {limit:g} s (lost: "
                f"{supervisor.worker_slots.lost}, restarts: {supervisor.worker_slots.restarts}); "
                "the run stops: finish it with rolltap eval --resume"
            ) from None
