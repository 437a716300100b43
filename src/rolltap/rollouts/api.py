"""An eval in this process: what :class:`~rolltap.rollouts.backend.InProcess` runs, the
run's result and hooks, and ``evaluate(...)`` with keywords (a run config built from
them, run in process). The one door to an eval, on any backend, is ``rolltap.evaluate``
(:mod:`rolltap.evaluation`).

>>> async def main() -> None:  # doctest: +SKIP
...     result = await evaluate("examples/patterns.jsonl", harness="chat", r=2, c=8,
...                             rewards=["prefix"], sampling={"temperature": 0, "max_tokens": 8})
...     print(result.run_id, result.summary["reward"]["mean"])
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ConfigError, RolltapError, StoreError
from rolltap.exports import write_sessions
from rolltap.gateway import Gateway, RolloutLimits
from rolltap.local import LocalModel
from rolltap.local.model import gguf_path
from rolltap.otel import open_tracer, otel_enabled
from rolltap.results.attempts import summarize_run
from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import DONE_STATUSES
from rolltap.rollouts.config import LimitsConfig, RunConfig
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.prepare import Plan, prepare
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.rollouts.runner import Runner, WorkItem
from rolltap.rollouts.tasks import Task, load_tasks
from rolltap.rollouts.workplan import plan_again
from rolltap.store import LeaseKeeper, RunInfo, Store, WriterStats
from rolltap.tokens import load_gguf_tokenizer

__all__ = [
    "LOCAL_SAMPLING",
    "Hooks",
    "RunResult",
    "Stoppable",
    "execute",
    "harness_name",
    "load_run_tasks",
    "report_store",
    "run_endpoint",
    "store_summary",
    "stored_run_config",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RunResult:
    """A finished (or interrupted) run: its id, every rollout and the summary;
    ``workers``: each worker's last heartbeat, when the run had worker processes.

    After a retry (``rolltap.retry_failed``), ``results`` holds every session of the run
    (each attempt), the summary one attempt per (task, sample), and ``retried`` how many
    new attempts the retry ran (0: nothing had failed; None: not a retry)."""

    run_id: str
    results: list[RolloutResult]
    summary: dict[str, Any]
    interrupted: bool = False
    workers: list[dict[str, Any]] = field(default_factory=list)
    retried: int | None = None

    @property
    def ok(self) -> bool:
        """At least one rollout ``completed`` or ``limit_reached`` and no commit failed
        (what ``rolltap eval`` exits 0 on)."""
        done = any(res.status in DONE_STATUSES for res in self.results)
        return done and not any(res.commit_failed for res in self.results)


class Stoppable(Protocol):
    """What runs a run's rollouts (a :class:`Runner`, or a driver of workers)."""

    def stop(self) -> None:
        """Admit no more rollouts and cancel those in flight (they end ``cancelled``)."""


@dataclass(slots=True)
class Hooks:
    """Callbacks for a front end: each result as it lands, the runner once built, the
    run id and size once it starts, and what happens before that (``on_stage``)."""

    on_result: Callable[[RolloutResult], None] | None = None
    #: what stops the run (its ``stop()`` cancels the rollouts in flight), once it exists
    on_runner: Callable[[Stoppable], None] | None = None
    on_plan: Callable[[str, int], None] | None = None
    #: what the run is doing before its first rollout (e.g. starting the local model)
    on_stage: Callable[[str], None] | None = None
    #: the store writer's state, about once a second while the run goes (progress)
    on_store: Callable[[WriterStats], None] | None = None
    gateway_settings: GatewaySettings | None = None
    #: places shared with other runs in this process: the run's rollouts take one each
    #: too (an eval set's ``c`` in parallel); runs on workers or Ray do not use them
    slots: asyncio.Semaphore | None = None
    extra: dict[str, Any] = field(default_factory=dict)


#: sampling used with the built-in local model when the run sets none (a small base
#: model rambles: keep calls short and deterministic)
LOCAL_SAMPLING: dict[str, Any] = {"temperature": 0.0, "max_tokens": 16}


@asynccontextmanager
async def run_endpoint(
    config: RunConfig, plan: Plan, hooks: Hooks
) -> AsyncIterator[EndpointConfig]:
    """The run's endpoint: the configured one, or the built-in local model started for
    the run (and stopped after it)."""
    if plan.endpoint is not None:
        yield plan.endpoint
        return
    if config.capture_tokens or config.capture_logprobs:
        # llama-server returns no token ids: nothing would be captured
        raise ConfigError("capture_tokens needs an endpoint (a vLLM server), not the local model")
    if hooks.on_stage is not None:
        hooks.on_stage("starting the local model…")
    async with LocalModel() as model:
        fields: dict[str, Any] = {}
        if config.client == "tokens":
            # llama-server's own /completion takes and returns token ids; the tokenizer is
            # the GGUF's own vocabulary unless one is given
            if config.tokenizer is None and hooks.on_stage is not None:
                hooks.on_stage("reading the local model's vocabulary…")
            tokenizer = config.tokenizer or str(
                await asyncio.to_thread(load_gguf_tokenizer, gguf_path())
            )
            fields = {"client": "tokens", "tokenizer": tokenizer, "completions_api": "llamacpp"}
        if config.unsupported is not None:
            fields["unsupported"] = config.unsupported
        yield EndpointConfig(name="local", base_url=model.base_url, model=model.model, **fields)


def _limits(config: LimitsConfig) -> RolloutLimits | None:
    if not config.is_set():
        return None
    return RolloutLimits(config.max_turns, config.max_tokens, config.timeout_s)


async def report_store(
    stats: Callable[[], WriterStats], report: Callable[[WriterStats], None]
) -> None:
    """Hand ``report`` (``Hooks.on_store``) the writer's state once a second, forever."""
    while True:
        report(stats())
        await asyncio.sleep(1.0)


async def _run_watched(
    runner: Runner, store: Store, items: list[WorkItem], ctx: _Context
) -> list[RolloutResult]:
    report = ctx.hooks.on_store
    if report is None:
        return await runner.run(items)
    async with asyncio.TaskGroup() as group:
        watcher = group.create_task(report_store(store.stats, report))
        try:
            return await runner.run(items)
        finally:
            watcher.cancel()


def _save_unsaved(runner: Runner, run: RunInfo) -> None:
    """The store gave up: write what it could not save next to the user, then stop."""
    err = runner.store_failure
    assert err is not None
    path = Path.cwd() / f"rolltap-unsaved-{run.id}.jsonl"
    unsaved = runner.unsaved()
    try:
        count = write_sessions(path, run, unsaved)
    except RolltapError as exc:
        raise type(err)(f"{err.message}; the run stopped, and {len(unsaved)} unsaved session(s) "
                        f"could not be written either: {exc.message}") from err  # fmt: skip
    raise type(err)(
        f"{err.message}; the run stopped: {count} unsaved session(s) written to {path} "
        f"(load them with: rolltap sessions import {path})"
    ) from err


def _keeper(store: Store, run_id: str, config: RunConfig) -> LeaseKeeper:
    """This process owns the run while it runs (a resume takes it over)."""
    return LeaseKeeper(store, run_id, ttl_s=config.lease_ttl_s, role="eval")


async def _run_on(
    store: Store, work: _Work, config: RunConfig, plan: Plan, ctx: _Context,
    owner: AsyncExitStack,
) -> list[RolloutResult]:  # fmt: skip
    recorder = StoreRecorder(store, final_commit=False, reader=store)
    async with run_endpoint(config, plan, ctx.hooks) as endpoint, recorder as observer:
        local = plan.endpoint is None
        sampling = config.sampling or (LOCAL_SAMPLING if local else {})
        settings = config.gateway_settings(ctx.hooks.gateway_settings)
        # a new run's id reaches each rollout span through the rollout's metadata
        tracing = open_tracer(config.otel, content=config.otel_content, run_id=work.run_id)
        async with (
            tracing as tracer,
            Gateway(endpoint, settings, observers=[observer], tracer=tracer) as gateway,
        ):
            # a token endpoint's tokenizer loads once, before the wave, not inside it
            await gateway.ready()
            # the run is created only now that everything it needs is up: a failed
            # start leaves no empty run behind
            run = await _run_of(store, work, config)
            if work.run_id is None:
                await owner.enter_async_context(_keeper(store, run.id, config))
            ctx.run_id = run.id
            if ctx.hooks.on_plan is not None:
                ctx.hooks.on_plan(run.id, len(work.items))
            runner = Runner(
                gateway=gateway, store=store, observer=observer, run_id=run.id,
                harness=plan.harness, scorer=plan.scorer, model=endpoint.model, c=config.c,
                limits=_limits(config.limits), sampling=sampling,
                on_result=ctx.hooks.on_result, admission=store.wait_for_room,
                node_id=socket.gethostname(), shared_slots=ctx.hooks.slots,
            )  # fmt: skip
            if ctx.hooks.on_runner is not None:
                ctx.hooks.on_runner(runner)
            results = await _run_watched(runner, store, work.items, ctx)
    if runner.store_failure is not None:
        _save_unsaved(runner, run)
    ctx.interrupted = runner.stopping
    ctx.complete = runner.store_failure is None and not runner.stopping
    return results


async def store_summary(store: Store, run_id: str, summary: dict[str, Any]) -> None:
    """Keep the summary with the run (what `runs compare` and `rolltap view` show);
    a run whose summary could not be stored still has its SQL summary."""
    try:
        await store.write_run_summary(run_id, summary)
    except StoreError as err:
        log.warning("run %s: summary not stored: %s", run_id, err)


async def _run_of(store: Store, work: _Work, config: RunConfig) -> RunInfo:
    """The run resumed, or a new one (created only once everything it needs is up)."""
    if work.run_id is not None:
        return await store.get_run(work.run_id)
    doc = {"run": config.model_dump(mode="json")}
    return await store.create_run(config.name, doc, set_id=config.set_id)


@dataclass(slots=True)
class _Work:
    """The rollouts to run, and the run they belong to (None: a new run)."""

    items: list[WorkItem]
    run_id: str | None = None


@dataclass(slots=True)
class _Context:
    hooks: Hooks
    interrupted: bool = False
    run_id: str = ""
    #: every rollout ran and was stored: its summary describes the run
    complete: bool = False


async def execute(
    config: RunConfig,
    *,
    tasks: Sequence[Task] | None = None,
    resume_run: str | None = None,
    retry_run: str | None = None,
    harness: Harness | None = None,
    endpoint: EndpointConfig | None = None,
    hooks: Hooks | None = None,
) -> RunResult:
    """Run (or resume, or retry the failed rollouts of) what ``config`` describes in this
    process (``InProcess``).

    Harness, rewards, endpoint, extras, tasks and store are checked before anything
    starts; a new run is created once its model and gateway are up, so a run that
    fails to start leaves nothing in the store.
    """
    if config.distributed:
        raise ConfigError(
            "workers/ray: a run on worker processes or Ray is run by "
            "rolltap.evaluate (what `rolltap eval --workers/--ray` uses)"
        )
    ctx = _Context(hooks or Hooks())
    plan = prepare(config, harness, endpoint)
    otel_enabled(config.otel)  # a missing extra fails before any run is created
    task_list, again = None, resume_run or retry_run
    if again is None:
        task_list = list(tasks) if tasks is not None else load_run_tasks(config)
    timeout = config.store_unavailable_timeout_s
    # the lease (in ``owner``) is released before the store closes
    async with (
        await Store.open(config.store, reconnect_timeout=timeout) as store,
        AsyncExitStack() as owner,
    ):
        if task_list is not None:
            work = _Work([WorkItem(t, s) for t in task_list for s in range(config.r)])
            earlier = list[RolloutResult]()
        else:
            assert again is not None
            # take the run over first: what a lost owner left is stored interrupted, and
            # its late commits are refused, before the plan deletes and reruns them
            await owner.enter_async_context(_keeper(store, again, config))
            items, earlier = await plan_again(store, again, config, tasks, retry=bool(retry_run))
            work = _Work(items, again)
        if work.items or retry_run is None:
            results = await _run_on(store, work, config, plan, ctx, owner)
        else:  # nothing failed (since the check before): nothing starts, nothing changes
            results, ctx.run_id = [], retry_run
        everything = earlier + results
        policy = config.attempt_policy
        summary = summarize_run(everything, r=config.r, policy=policy, calls_known=not earlier)
        if ctx.complete:
            await store_summary(store, ctx.run_id, summary)
    retried = len(results) if retry_run else None
    return RunResult(ctx.run_id, everything, summary, ctx.interrupted, retried=retried)


def load_run_tasks(config: RunConfig) -> list[Task]:
    """The tasks a new run's config names (its ``n``, ``shuffle`` and ``seed`` applied)."""
    if config.tasks is None:
        raise ConfigError("no tasks: give a tasks file")
    return load_tasks(config.tasks, n=config.n, shuffle=config.shuffle, seed=config.seed)


def harness_name(fn: Harness) -> str:
    """``module:qualname``: how a run's stored config names a harness given as a function."""
    module = getattr(fn, "__module__", "?")
    return f"{module}:{getattr(fn, '__qualname__', type(fn).__name__)}"


async def stored_run_config(
    run_id: str, *, store: str | None = None, overrides: dict[str, Any] | None = None
) -> tuple[str, RunConfig]:
    """The full id of ``run_id`` (a unique prefix will do) and the config it ran with,
    ``overrides`` applied: what a resume reruns."""
    async with await Store.open(store) as opened:
        run_id = await opened.resolve_run_id(run_id)
        info = await opened.get_run(run_id)
    stored = info.config.get("run")
    if not isinstance(stored, dict):
        raise ConfigError(f"run {run_id} was not made by rolltap eval (no run config)")
    config = RunConfig.model_validate({**stored, "store": store}).merged(overrides or {})
    return run_id, config
