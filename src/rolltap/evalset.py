"""``rolltap.eval_set`` and ``rolltap.resume_eval_set``: several runs under one set id.

A set (:mod:`rolltap.rollouts.evalset_config`) runs its runs in order (``sequential``) or
all at once (``parallel``, ``c`` places shared by them), each through :func:`rolltap.evaluate`
and, when ``retries`` allows, :func:`rolltap.retry_failed` passes (backing off
``retry_backoff_s * 2**(k-1)`` before pass k) until nothing failed. Each run is stored
with the set's id and its place in the set, so :func:`resume_eval_set` picks the set up
from the store alone: a finished run is left as it is (its retries go on where they
stopped), one cut short is resumed (or its retry pass finished), one never started runs.

>>> async def main() -> None:  # doctest: +SKIP
...     done = await eval_set("examples/eval-set.toml")
...     print(done.set_id, done.summary["rollouts"], [run.run_id for run in done.runs])
...     again = await resume_eval_set(done.set_id[:8])  # nothing left: nothing runs
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rolltap import evaluation
from rolltap.errors import ConfigError, RolltapError
from rolltap.results.sets import set_summary
from rolltap.rollouts.api import Hooks, RunResult, load_run_tasks
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.evalset_config import EvalSetConfig, load_eval_set, set_doc, set_from_doc
from rolltap.rollouts.prepare import prepare
from rolltap.rollouts.set_control import SetControl
from rolltap.store import RunInfo, Store, resolve_store_url, run_policy, run_r

__all__ = ["SetControl", "SetResult", "SetRun", "eval_set", "read_eval_set", "resume_eval_set"]


@dataclass(slots=True)
class SetRun:
    """One run of a set: where it stands after this call, and its summary."""

    index: int
    name: str | None
    run_id: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    #: the run's retry passes so far (``retries`` bounds them)
    retried: int = 0


@dataclass(slots=True)
class SetResult:
    """A set after :func:`eval_set` or :func:`resume_eval_set`: its runs and its summary
    (their rollouts counted together, :mod:`rolltap.results.sets`)."""

    set_id: str
    name: str | None
    runs: list[SetRun]
    summary: dict[str, Any]
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        """Whether every run ran to its end and one rollout of the set succeeded."""
        done = self.summary.get("statuses", {})
        good = done.get("completed", 0) + done.get("limit_reached", 0)
        return not self.interrupted and all(r.run_id for r in self.runs) and good > 0


def _in_process(run: RunConfig) -> bool:
    """Whether ``run`` (placed: :func:`_placed`) runs in this process."""
    return not run.distributed


def _placed(config: EvalSetConfig, run: RunConfig) -> RunConfig:
    """``run`` with ``workers = "auto"`` decided: by the set's ``c`` when sequential, by
    its own before the set shares ``c`` out when parallel (a share does not move it)."""
    c = config.c if config.mode == "sequential" and config.c is not None else run.c
    backend = evaluation.backend_for(run.model_copy(update={"c": c}))
    return run.placed(backend.placement())


def _share(config: EvalSetConfig, run: RunConfig) -> int:
    """A run's ``c``: the set's when sequential, or in parallel in this process (where
    the set's shared places bound them all); on workers, its part of the set's."""
    if config.c is None:
        return run.c
    if config.mode == "sequential":
        return config.c
    if _in_process(run):
        return min(run.c, config.c)
    return min(run.c, max(1, config.c // len(config.runs)))


async def _stored(store: str | None, run_id: str) -> tuple[RunInfo, dict[str, Any], bool]:
    """The run, its summary, and whether it ran to its end (its owner stored the summary)."""
    async with await Store.open(store, create=False) as opened:
        info, summary = await opened.get_run(run_id), await opened.run_summary(run_id)
    return info, summary, bool(summary.get("stored"))


class _Driver:
    def __init__(self, set_id: str, config: EvalSetConfig, control: SetControl) -> None:
        self.set_id, self.config, self.control = set_id, config, control
        # in parallel, the runs in this process take their places from one pool: the
        # set never has more than ``c`` in flight, and a run that ends frees its part
        together = config.mode == "parallel" and config.c is not None
        self.slots = asyncio.Semaphore(config.c) if together and config.c else None

    async def run(self, index: int, run: RunConfig, existing: RunInfo | None) -> SetRun:
        out = SetRun(index, run.name)
        run = _placed(self.config, run)
        run = run.model_copy(update={"set_id": self.set_id, "c": _share(self.config, run)})
        hooks = self.control.hooks(index, run.name)
        if _in_process(run):
            hooks.slots = self.slots
        result: RunResult | None = None
        if existing is None:
            result = await evaluation.evaluate(run, hooks=hooks)
        elif not (await _stored(run.store, existing.id))[2]:
            if existing.retries:  # cut short in a retry pass: that pass is finished
                result = await self._retry(existing.id, hooks)
            else:
                result = await evaluation.resume(existing.id, store=run.store, hooks=hooks)
        out.run_id = result.run_id if result else existing.id if existing else None
        out.interrupted = bool(result and result.interrupted)
        if out.run_id is None:
            return out
        if not out.interrupted:
            out.interrupted = await self._retries(out.run_id, run.store, hooks)
        info, out.summary, _ = await _stored(run.store, out.run_id)
        out.retried = info.retries
        return out

    async def _retry(self, run_id: str, hooks: Hooks) -> RunResult:
        return await evaluation.retry_failed(
            run_id, store=self.config.store, codes=self.config.retry_codes, hooks=hooks
        )

    async def _retries(self, run_id: str, store: str | None, hooks: Hooks) -> bool:
        """Retry passes of what failed, up to ``retries`` for the run in all; whether one
        was cut short."""
        info, summary, _ = await _stored(store, run_id)
        for attempt in range(info.retries, self.config.retries):
            if not _failed(summary, self.config.retry_codes):
                return False
            if not await self.control.backoff(self.config.retry_backoff_s * 2**attempt):
                return False
            result = await self._retry(run_id, hooks)
            if result.interrupted:
                return True
            if not result.retried:
                return False
            summary = result.summary
        return False


def _failed(summary: Mapping[str, Any], codes: list[str] | None) -> bool:
    """Whether the run's summary counts a failed rollout (with one of ``codes``)."""
    errors = summary.get("errors") or {}
    return bool(errors) if codes is None else any(code in errors for code in codes)


async def _by_index(store: Store, set_id: str) -> dict[int, RunInfo]:
    """The set's runs started so far, by their place in the set."""
    found = {}
    for info in await store.set_runs(set_id):
        index = info.config.get("run", {}).get("set_index")
        if isinstance(index, int):
            found[index] = info
    return found


async def _drive(
    set_id: str, config: EvalSetConfig, runs: list[RunConfig], control: SetControl
) -> SetResult:
    async with await Store.open(config.store, create=False) as opened:
        existing = await _by_index(opened, set_id)
    driver = _Driver(set_id, config, control)
    done: list[SetRun] = []
    if config.mode == "parallel":
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(driver.run(i, run, existing.get(i)))
                         for i, run in enumerate(runs)]  # fmt: skip
        except ExceptionGroup as errors:
            # one run that could not run (its endpoint, its tasks…) stops the set: said
            # as that run's error, the others cancelled (resumable)
            first = next((e for e in errors.exceptions if isinstance(e, RolltapError)), None)
            if first is None:
                raise
            raise first from errors
        done = [task.result() for task in tasks]
    else:
        for i, run in enumerate(runs):
            if control.stopped:
                done.append(SetRun(i, run.name, existing[i].id if i in existing else None,
                                   interrupted=True))  # fmt: skip
                continue
            done.append(await driver.run(i, run, existing.get(i)))
    async with await Store.open(config.store, create=False) as opened:
        summary = await _totals(opened, done)
    stopped = control.stopped or any(run.interrupted for run in done)
    return SetResult(set_id, config.name, done, summary, interrupted=stopped)


async def _totals(store: Store, done: list[SetRun]) -> dict[str, Any]:
    """The set's summary from what its runs stored (see :mod:`rolltap.results.sets`)."""
    parts, summaries = [], []
    for run in done:
        if run.run_id is None:
            continue
        info = await store.get_run(run.run_id)
        results = await store.run_results(run.run_id)
        parts.append((results, run_policy(info.config), run_r(info.config)))
        summaries.append(run.summary)
    return set_summary(parts, summaries)


async def read_eval_set(set_id: str, *, store: str | None = None) -> SetResult:
    """Stored set ``set_id`` (a unique prefix will do) as it stands: its runs' summaries
    and the set's; a run not started yet has no ``run_id``. Nothing runs."""
    url = resolve_store_url(store)
    async with await Store.open(url, create=False) as opened:
        full_id = await opened.resolve_eval_set_id(set_id)
        info = await opened.get_eval_set(full_id)
        config, runs = set_from_doc(info.config, {"store": url})
        stored = await _by_index(opened, full_id)
        done = []
        for i, run in enumerate(runs):
            found = stored.get(i)
            if found is None:
                done.append(SetRun(i, run.name, interrupted=True))
                continue
            summary = await opened.run_summary(found.id)
            done.append(SetRun(i, run.name, found.id, summary, retried=found.retries,
                               interrupted=not summary.get("stored")))  # fmt: skip
        summary = await _totals(opened, done)
    return SetResult(full_id, config.name, done, summary,
                     interrupted=any(r.interrupted for r in done))  # fmt: skip


def _check(path: str | Path, runs: list[RunConfig]) -> None:
    """Every run's harness, rewards, endpoint and tasks load, before anything is stored or
    started (a mistake in the third run is not found after the first two ran)."""
    for index, run in enumerate(runs):
        try:
            prepare(run)
            load_run_tasks(run)
        except ConfigError as err:
            raise ConfigError(f"{path}: runs[{index}] ({run.name}): {err.message}") from err


async def eval_set(
    path: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    control: SetControl | None = None,
) -> SetResult:
    """Run the eval set file ``path`` (``overrides``: its fields, e.g. ``{"c": 8}``): a new
    set in its store, then its runs (see the module docs)."""
    config, runs = load_eval_set(path, overrides)
    _check(path, runs)
    config = config.model_copy(update={"store": resolve_store_url(config.store)})
    runs = [run.model_copy(update={"store": config.store}) for run in runs]
    async with await Store.open(config.store) as opened:
        info = await opened.create_eval_set(config.name, set_doc(config, runs))
    return await _drive(info.id, config, runs, control or SetControl())


async def resume_eval_set(
    set_id: str,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    control: SetControl | None = None,
) -> SetResult:
    """Go on with stored set ``set_id`` (a unique prefix will do) from where it stopped,
    with the config it was given (``overrides`` over its fields); no file is needed."""
    url = resolve_store_url(store)
    async with await Store.open(url, create=False) as opened:
        full_id = await opened.resolve_eval_set_id(set_id)
        info = await opened.get_eval_set(full_id)
    config, runs = set_from_doc(info.config, {**(overrides or {}), "store": url})
    return await _drive(full_id, config, runs, control or SetControl())
