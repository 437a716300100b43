"""A worker's runs of its jobs: each rollout the supervisor submitted (its
:class:`~rolltap.serve.supervisor.placement.Job`) runs here on the library's own
:class:`Runner`, as a :class:`JobRun`.

One runner per rollout, because each submission brings its own harness, rewards,
limits, sampling, user and endpoint; they all share the worker's gateway (and with it
the model-client pool) and its store recorder. Harnesses and scorers are built once per
spec and reused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from rolltap.errors import ConfigError, StoreError
from rolltap.gateway import Gateway, RolloutLimits
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.harness_loader import load_harness
from rolltap.rollouts.recorder import SessionStore, StoreRecorder
from rolltap.rollouts.rewards import Scorer, parse_reward_spec
from rolltap.rollouts.runner import Runner, WorkItem
from rolltap.rollouts.subprocess_harness import command_harness
from rolltap.rollouts.tasks import Task
from rolltap.rollouts.unsaved import UnsavedFiles
from rolltap.serve.outcomes import store_outcome, terminal_result
from rolltap.serve.protocol import RolloutSpec, WorkerConfig
from rolltap.serve.worker.session_store import JobStore
from rolltap.store import Store

__all__ = ["JobRun", "JobRunFactory", "block_loop"]

#: harnesses and scorers a worker keeps built (each is small; the bound is what matters)
_CACHE_LIMIT = 256


def block_loop(seconds: float) -> None:
    """The test hook behind ``block_loop_s``: hold the event loop, as a bad harness would."""
    time.sleep(seconds)


@dataclass(eq=False)
class JobRun:
    """One submitted job (a rollout) running on this worker."""

    id: str
    run_id: str
    session_id: str
    spec: RolloutSpec
    task: Task
    store: SessionStore
    runner: Runner | None
    #: why the rollout cannot run at all (then it ends ``error`` without running)
    refusal: str | None = None
    block_s: float | None = None
    #: where its session goes if the store gives up before its last commit lands
    unsaved: UnsavedFiles | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    #: a later attempt of its (task, sample) repeats the session ``retry_of``
    attempt: int = 0
    retry_of: str | None = None

    def cancel(self) -> None:
        """Stop the rollout: its harness is cancelled and it ends ``cancelled``."""
        self.cancelled = True
        if self.runner is not None:
            self.runner.stop()

    async def run(self) -> dict[str, Any]:
        """Run the rollout to its end; the result the caller gets (it is stored too)."""
        if self.block_s is not None:
            block_loop(self.block_s)
        if self.runner is not None and not self.cancelled:
            item = WorkItem(self.task, self.spec.sample, self.attempt, self.retry_of)
            results = await self.runner.run([item])
            if results:
                out = results[0].to_wire()
                if self.runner.store_failure is not None:
                    await self._save_unsaved(self.runner, out)
                return out
        status, error = ("error", self.refusal) if self.refusal else ("cancelled", "cancelled")
        return await self._ended_early(status, error)

    async def _save_unsaved(self, runner: Runner, out: dict[str, Any]) -> None:
        """The store gave up before the last commit landed: the session goes to this
        worker's unsaved-sessions file, and the result says where."""
        err = runner.store_failure
        assert err is not None
        out["error_code"], out["error_message"] = err.code, err.message
        unsaved = runner.unsaved()
        if not unsaved:
            out["error"] = f"store: {err.message}"  # it never started: nothing to keep
            return
        try:
            assert self.unsaved is not None
            path = await self.unsaved.save(self.run_id, unsaved)
        except StoreError as exc:
            out["error"] = f"store: {err.message}; not saved either: {exc.message}"
            return
        out["unsaved_file"] = str(path)
        out["error"] = (
            f"store: {err.message}; the session is in {path} "
            f"(load it with: rolltap sessions import {path})"
        )

    async def _ended_early(self, status: str, error: str | None) -> dict[str, Any]:
        try:
            await store_outcome(
                self.store, run_id=self.run_id, session_id=self.session_id, task=self.task,
                sample=self.spec.sample, user=self.spec.user, status=status, error=error,
                attempt=self.attempt, retry_of=self.retry_of,
            )  # fmt: skip
        except StoreError as err:
            error = f"{error}; store: {err.message}"
        out = terminal_result(self.task, self.spec.sample, self.session_id, status, error)
        out["duration_s"] = time.monotonic() - self.started
        return out


def _bounded_put(cache: dict[Any, Any], key: Any, value: Any) -> None:
    # callers may send a distinct command line per rollout: a worker that lives for
    # days must not remember them all
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


class JobRunFactory:
    """Builds job runs from ``submit`` frames, against this worker's gateway and store."""

    def __init__(
        self,
        config: WorkerConfig,
        gateway: Gateway,
        store: SessionStore,
        recorder: StoreRecorder,
        *,
        http: aiohttp.ClientSession,
        node: str | None = None,
    ) -> None:
        self.config, self.gateway, self.store, self.recorder = config, gateway, store, recorder
        #: the connections of every rollout's harness (the worker's, closed by it)
        self.http = http
        #: where this worker's sessions say they ran (its node, its slot)
        self.node, self.worker_id = node, f"w{config.index}"
        self._models = {ep.name: ep.model for ep in config.endpoints}
        self._harnesses: dict[tuple[str, str | None, str | None], Harness] = {}
        self._scorers: dict[tuple[str, ...], Scorer] = {}
        self._unsaved = UnsavedFiles(config.unsaved_dir, config.index)

    def _harness(self, spec: RolloutSpec) -> Harness:
        options = spec.harness_options
        key = (spec.harness, spec.cmd, None if options is None else options.model_dump_json())
        harness = self._harnesses.get(key)
        if harness is None:
            harness = command_harness(spec.cmd) if spec.cmd else load_harness(spec.harness, options)
            _bounded_put(self._harnesses, key, harness)
        return harness

    def _scorer(self, spec: RolloutSpec) -> Scorer:
        key = tuple(spec.rewards)
        scorer = self._scorers.get(key)
        if scorer is None:
            scorer = Scorer([parse_reward_spec(r) for r in key])
            _bounded_put(self._scorers, key, scorer)
        return scorer

    def _limits(self, spec: RolloutSpec) -> RolloutLimits:
        # every rollout gets a wall-clock bound, so none can hold a caller forever
        cap = self.config.max_rollout_s
        timeout = min(spec.limits.timeout_s or cap, cap)
        return RolloutLimits(spec.limits.max_turns, spec.limits.max_tokens, timeout)

    def make(self, message: dict[str, Any]) -> JobRun:
        """A job for one ``submit`` frame (synchronous: a cancel may follow at once)."""
        spec = RolloutSpec.model_validate(message["spec"])
        epoch = message.get("epoch")
        if isinstance(self.store, Store) and isinstance(epoch, int):
            # this worker writes the run itself: fenced by its supervisor's lease
            self.store.hold_epoch(message["run_id"], epoch)
        job = JobRun(
            id=message["job"], run_id=message["run_id"], session_id=message["session_id"],
            spec=spec, task=spec.to_task(), store=JobStore(self.store, message["session_id"]),
            runner=None, unsaved=self._unsaved,
            # absent unless the driver of an eval's retry sent a later attempt
            attempt=int(message.get("attempt") or 0), retry_of=message.get("retry_of"),
        )  # fmt: skip
        if spec.block_loop_s is not None and self.config.test_hooks:
            job.block_s = spec.block_loop_s
        endpoint = spec.endpoint or self.config.endpoints[0].name
        try:
            job.runner = Runner(
                gateway=self.gateway, store=job.store, observer=self.recorder,
                run_id=job.run_id, harness=self._harness(spec), scorer=self._scorer(spec),
                model=self._models[endpoint], c=1, limits=self._limits(spec),
                sampling=spec.sampling, user=spec.user, endpoint=endpoint, http_session=self.http,
                node_id=self.node, worker_id=self.worker_id,
            )  # fmt: skip
        except ConfigError as err:
            job.refusal = f"{err.code}: {err.message}"
        except KeyError:
            job.refusal = f"invalid_config: unknown endpoint {endpoint!r}"
        return job
