"""``rolltap.evaluate``, ``rolltap.resume`` and ``rolltap.retry_failed``: the one door to
an eval, whatever runs it.

An eval is a :class:`~rolltap.rollouts.config.RunConfig` (tasks, harness, endpoint,
rewards, ``n`` × ``r`` rollouts, ``c`` at once, …) handed to a backend, the way an httpx
client hands a request to its transport: :class:`~rolltap.rollouts.backend.InProcess`
(this process's event loop), :class:`~rolltap.serve.backends.Workers` (``n`` worker
processes) or :class:`~rolltap.serve.backends.Ray` (Ray actors on a cluster). With no
backend, the config's own ``workers``/``ray`` fields choose (``InProcess`` when unset),
which is what ``rolltap eval`` and a resume do.

>>> import rolltap
>>> async def main() -> None:  # doctest: +SKIP
...     config = rolltap.RunConfig(tasks="examples/patterns.jsonl", r=2, rewards=["prefix"])
...     result = await rolltap.evaluate(config, backend=rolltap.Workers(2))
...     print(result.run_id, result.summary["reward"]["mean"])
...     again = await rolltap.resume(result.run_id)  # on 2 workers again
...     retried = await rolltap.retry_failed(result.run_id, codes=["upstream_timeout"])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rolltap.config import EndpointConfig
from rolltap.results.attempts import AttemptPolicy, summarize_run
from rolltap.rollouts.api import Hooks, RunResult, harness_name, stored_run_config
from rolltap.rollouts.auto_workers import auto_workers
from rolltap.rollouts.backend import Backend, InProcess
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.tasks import Task
from rolltap.rollouts.workplan import plan_retry
from rolltap.serve.backends import Ray, Workers
from rolltap.store import Store

__all__ = ["backend_for", "evaluate", "resume", "retry_failed"]


def backend_for(config: RunConfig, *, in_process_harness: bool = False) -> Backend:
    """The backend ``config``'s ``workers``/``ray`` fields name: ``workers = "auto"`` (or
    unset) picks worker processes when ``c`` needs them and the machine has the cores
    (:func:`~rolltap.rollouts.auto_workers.auto_workers`), else ``InProcess`` — always
    ``InProcess`` for an ``in_process_harness`` (a function, which cannot travel)."""
    workers = config.workers
    if config.ray is not None:
        count = workers if isinstance(workers, int) else None
        return Ray(config.ray, count, config.workers_per_node, config.ray_working_dir)
    if workers is None or workers == "auto":
        workers = 0 if in_process_harness else auto_workers(config.c)
    return Workers(workers) if workers else InProcess()


async def evaluate(
    config: RunConfig,
    backend: Backend | None = None,
    *,
    tasks: Sequence[Task] | None = None,
    harness: Harness | None = None,
    endpoint: EndpointConfig | None = None,
    hooks: Hooks | None = None,
) -> RunResult:
    """Run what ``config`` describes on ``backend`` (default: where ``config`` says).

    Harness, rewards, endpoint, extras, tasks and store are checked before anything
    starts; a run is created once its model and gateway are up, so a run that fails to
    start leaves nothing in the store. ``tasks``, ``harness`` (a function: in process
    only) and ``endpoint`` win over what ``config`` names; ``hooks`` feed a front end
    (each result, the plan, progress, what to ``stop()`` on a signal).
    """
    backend = backend or backend_for(config, in_process_harness=harness is not None)
    if harness is not None:  # the stored config names what ran, not the default harness
        config = config.merged({"harness": harness_name(harness)})
    return await backend.run(config, tasks=tasks, harness=harness, endpoint=endpoint, hooks=hooks)


async def resume(
    run_id: str,
    backend: Backend | None = None,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    tasks: Sequence[Task] | None = None,
    hooks: Hooks | None = None,
) -> RunResult:
    """Rerun every rollout of ``run_id`` (a unique prefix will do) that did not finish,
    with the config it ran with (``overrides`` applied), on ``backend`` (default: where
    that config says: where the run ran)."""
    run_id, config = await stored_run_config(run_id, store=store, overrides=overrides)
    backend = backend or backend_for(config)
    return await backend.run(config, resume_run=run_id, tasks=tasks, hooks=hooks)


async def retry_failed(
    run_id: str,
    backend: Backend | None = None,
    *,
    store: str | None = None,
    codes: Sequence[str] | None = None,
    policy: AttemptPolicy | None = None,
    overrides: dict[str, Any] | None = None,
    hooks: Hooks | None = None,
) -> RunResult:
    """Run a new attempt of every rollout of ``run_id`` (a unique prefix will do) whose
    latest attempt failed — only those failed with one of ``codes`` when given (``["all"]``:
    any) —, each a new session of the run linked to the one it repeats, with the config
    the run ran with (``overrides`` applied as for :func:`resume`), on ``backend``
    (default: where the run ran). The summary counts one attempt per (task, sample) by
    ``policy`` (``best`` or ``last``; None: the run's), which is stored with the run.

    Nothing failed (with those codes): nothing starts, nothing is stored, and the result
    says ``retried == 0``. ``results`` holds every session of the run, each attempt.
    """
    fields = {**(overrides or {}), "retry_codes": None if codes is None else list(codes),
              "attempt_policy": policy}  # fmt: skip
    run_id, config = await stored_run_config(run_id, store=store, overrides=fields)
    async with await Store.open(store) as opened:  # read only: is there anything to run?
        items, earlier = await plan_retry(opened, run_id, config.retry_codes)
    if not items:
        summary = summarize_run(
            earlier, r=config.r, policy=config.attempt_policy, calls_known=False
        )
        return RunResult(run_id, earlier, summary, retried=0)
    backend = backend or backend_for(config)
    return await backend.run(config, retry_run=run_id, hooks=hooks)
