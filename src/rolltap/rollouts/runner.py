"""The runner: tasks × samples as rollouts through one gateway, at most ``c`` at once.

Each rollout: a store session (its task dict names ``task_id`` and ``sample``), a
gateway registration (limits, sampling), the harness, then unregister (or abort),
reward, and a final commit with status and reward. Events are committed incrementally
as calls finish (:class:`~rolltap.rollouts.recorder.StoreRecorder`). :meth:`Runner.stop`
stops admitting and cancels the harnesses in flight; those rollouts end ``cancelled``.
A rollout's place among the ``c`` is freed once it is scored, before its final commit
lands, so the run goes on while the database is away; ``admission`` (the store's
``wait_for_room``) holds back new rollouts while pending writes pass their memory bound.
On ``store_unavailable``/``store_full`` the runner stops (:meth:`Runner.unsaved`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
import httpx2

from rolltap.errors import RolltapError, StoreBusyError, StoreError
from rolltap.events import Event, EventKind, EventLog
from rolltap.gateway import Gateway, Rollout, RolloutLimits
from rolltap.results.failure import last_model_error
from rolltap.results.rollout import (
    RolloutResult,
    call_stats,
    made_no_model_calls,
    no_model_calls_note,
)
from rolltap.results.statuses import HARNESS_RAN_STATUSES, REWARD_ERROR, STALE
from rolltap.rollouts.harness import Harness, HarnessContext, answer_of
from rolltap.rollouts.harness_http import harness_session, rollout_client
from rolltap.rollouts.recorder import SESSION_KEY, SessionStore, StoreRecorder
from rolltap.rollouts.rewards import Scorer
from rolltap.rollouts.tasks import Task
from rolltap.rollouts.unsaved import Unsaved, is_fatal
from rolltap.store import SessionInfo

__all__ = ["Runner", "WorkItem"]

log = logging.getLogger("rolltap.rollouts.runner")


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One rollout to run: a task and its sample index (0-based); a later ``attempt`` of
    that (task, sample) repeats the session ``retry_of`` (``rolltap eval --retry-failed``)."""

    task: Task
    sample: int
    attempt: int = 0
    retry_of: str | None = None


@dataclass(slots=True)
class _Outcome:
    status: str
    answer: str | None = None
    error: str | None = None


class Runner:
    """Runs work items on ``gateway``, persisting to ``store`` under ``run_id``."""

    def __init__(
        self,
        *,
        gateway: Gateway,
        store: SessionStore,
        observer: StoreRecorder,
        run_id: str,
        harness: Harness,
        scorer: Scorer,
        model: str,
        c: int,
        limits: RolloutLimits | None = None,
        sampling: dict[str, Any] | None = None,
        on_result: Callable[[RolloutResult], None] | None = None,
        user: str | None = None,
        endpoint: str | None = None,
        http_session: aiohttp.ClientSession | None = None,
        admission: Callable[[], Awaitable[None]] | None = None,
        node_id: str | None = None,
        worker_id: str | None = None,
        shared_slots: asyncio.Semaphore | None = None,
    ) -> None:
        self.gateway, self.store, self.observer = gateway, store, observer
        self.run_id, self.harness, self.scorer, self.model = run_id, harness, scorer, model
        self.c, self.limits, self.sampling = c, limits, dict(sampling or {})
        self.on_result = on_result
        #: the user and endpoint name every rollout registers with (pool identity)
        self.user, self.endpoint = user, endpoint
        #: where this runner runs, recorded with every session it creates (None: not said)
        self.node_id, self.worker_id = node_id, worker_id
        self.stopping = False
        self.results: list[RolloutResult] = []
        self.admission = admission
        #: a bound shared with other runs in this process (an eval set's ``c`` in
        #: parallel): each rollout holds one of these as well as one of its run's ``c``
        self.shared_slots = shared_slots
        #: rollouts started (past admission); the store error that stopped the run, if any
        self.admitted, self.store_failure = 0, cast(StoreError | None, None)
        self._unsaved = Unsaved()
        self._in_harness: dict[int, asyncio.Task[Any]] = {}
        self._t0 = time.monotonic()
        #: the connections under every rollout's ``ctx.http_client``: one session for
        #: the run (a long-lived owner of many runners, like a serve worker, passes its own)
        self._http, self._own_http = http_session, http_session is None

    def stop(self) -> None:
        """Admit no more rollouts and cancel the harnesses in flight (→ ``cancelled``)."""
        self.stopping = True
        for task in list(self._in_harness.values()):
            task.cancel()

    def unsaved(self) -> list[tuple[SessionInfo, EventLog]]:
        """Sessions whose final commit has not landed, each with its status and its log."""
        return self._unsaved.sessions()

    def _store_failed(self, err: StoreError) -> bool:
        """Stop the run on an error the store will not get over by itself; whether it was."""
        if not is_fatal(err):
            return False
        if self.store_failure is None:
            log.info("stopping the run: %s", err.message)  # the run's error says it again
            self.store_failure = err
        self.stop()
        return True

    async def run(self, items: Iterable[WorkItem]) -> list[RolloutResult]:
        """Run ``items``, at most ``c`` registered at a time; the results in finish order."""
        self._t0 = time.monotonic()
        slots = asyncio.Semaphore(self.c)
        async with self._harness_http(), asyncio.TaskGroup() as group:
            for item in items:
                await slots.acquire()
                if self.shared_slots is not None:
                    await self.shared_slots.acquire()
                await self._admit()
                if self.stopping:
                    self._free(slots)
                    break
                self.admitted += 1
                group.create_task(self._guarded(item, slots))
        return self.results

    @asynccontextmanager
    async def _harness_http(self) -> AsyncIterator[None]:
        """The run's HTTP session, unless its owner gave one (closed by its owner)."""
        if not self._own_http:
            yield
            return
        # one TLS context for the run: building one loads the CA store (tens of ms)
        async with harness_session(ssl.create_default_context()) as session:
            self._http = session
            try:
                yield
            finally:
                self._http = None

    def _free(self, slots: asyncio.Semaphore) -> None:
        """Give back a rollout's place: its run's, and the shared one it held."""
        slots.release()
        if self.shared_slots is not None:
            self.shared_slots.release()

    async def _admit(self) -> None:
        if self.admission is None or self.stopping:
            return
        try:
            await self.admission()
        except StoreError as err:
            if not self._store_failed(err):
                raise

    async def _guarded(self, item: WorkItem, slots: asyncio.Semaphore) -> None:
        held = [True]

        def release() -> None:  # once: when the rollout is scored, or on the way out
            if held and held.pop():
                self._free(slots)

        try:
            result = await self._one(item, release)
        finally:
            release()
        self.results.append(result)
        if self.on_result is not None:
            self.on_result(result)

    async def _one(self, item: WorkItem, release: Callable[[], None]) -> RolloutResult:
        started = time.monotonic()
        result = RolloutResult(item.task.id, item.sample, None, "error",
                               attempt=item.attempt, retry_of=item.retry_of)  # fmt: skip
        result.started_s = started - self._t0
        task_dict = {"task_id": item.task.id, "sample": item.sample, "task": item.task.to_dict()}
        try:
            session = await self._create_session(task_dict, item)
        except StoreError as err:
            self._store_failed(err)
            result.error = f"store: {err}"
            result.error_code, result.error_message = err.code, err.message
            result.commit_failed = True
            return result
        result.session_id = session.id
        self._unsaved.track(session, EventLog())
        try:
            rollout = await self.gateway.register(
                metadata={
                    SESSION_KEY: session.id,
                    "run_id": self.run_id,
                    "task_id": item.task.id,
                    "sample": item.sample,
                },
                limits=self.limits,
                sampling=self.sampling or None,
                user=self.user,
                endpoint=self.endpoint,
            )
        except RolltapError as err:
            result.error = f"{err.code}: {err.message}"
            result.error_code, result.error_message = err.code, err.message
            await self._final_commit(session.id, None, result)
            return result
        self._unsaved.track(session, rollout.log)
        outcome = await self._drive(item.task, rollout)
        await self._finish(item.task, rollout, outcome, result, release)
        result.duration_s = time.monotonic() - started
        return result

    async def _create_session(self, task: dict[str, Any], item: WorkItem) -> SessionInfo:
        while True:
            try:
                return await self.store.create_session(
                    self.run_id, task=task, node_id=self.node_id, worker_id=self.worker_id,
                    attempt=item.attempt, retry_of=item.retry_of,
                )  # fmt: skip
            except StoreBusyError:  # a slow or restarting database: wait, do not fail
                log.info("store busy; waiting to create the session")

    def _context(self, rollout: Rollout, http: httpx2.AsyncClient) -> HarnessContext:
        urls = self.gateway.describe(rollout)
        return HarnessContext(
            rollout_id=rollout.id,
            openai_base_url=urls["openai_base_url"],
            anthropic_base_url=urls["anthropic_base_url"],
            api_key=urls["api_key"],
            model=self.model,
            sampling=dict(self.sampling),
            log=rollout.log,
            timeout_s=self.limits.timeout_s if self.limits else None,
            http_client=http,
        )

    async def _drive(self, task: Task, rollout: Rollout) -> _Outcome:
        """Run the harness under the rollout timeout; how it ended."""
        if self.stopping:
            return _Outcome("cancelled", error="stopped before the harness started")
        current = asyncio.current_task()
        assert current is not None
        key = id(current)
        timeout = self.limits.timeout_s if self.limits else None
        self._in_harness[key] = current
        try:
            # an HTTP client of the rollout's own, on the run's connections
            assert self._http is not None, "a rollout runs inside Runner.run"
            async with asyncio.timeout(timeout) as scope, rollout_client(self._http) as http:
                answer = answer_of(await self.harness(task, self._context(rollout, http)))
            return _Outcome("completed", answer=answer.answer)
        except asyncio.CancelledError:
            if not self.stopping or current.uncancel() > 0:
                raise
            return _Outcome("cancelled", error="stopped")
        except TimeoutError as exc:
            if scope.expired():
                return _Outcome("timeout", error=f"harness exceeded {timeout:g} s")
            return _Outcome("failed", error=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001
            # A harness crash is its rollout's failure, never the run's: translated into
            # the rollout's status and error (recorded in its log), not swallowed.
            return _Outcome("failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._in_harness.pop(key, None)

    async def _finish(
        self,
        task: Task,
        rollout: Rollout,
        outcome: _Outcome,
        result: RolloutResult,
        release: Callable[[], None],
    ) -> None:
        if outcome.status in ("completed", "failed"):
            await self.gateway.unregister(rollout.id)
        else:
            await self.gateway.abort(rollout.id)
        hit = rollout.limit_reached
        status = "limit_reached" if hit and outcome.status != "cancelled" else outcome.status
        result.status, result.answer, result.error = status, outcome.answer, outcome.error
        if rollout.stale and outcome.status != "cancelled":
            # refused a call as policy_stale (the harness got a 409): labelled, not scored
            result.status, result.answer, result.error = STALE, None, _stale_error(rollout)
            status = STALE
        if status in HARNESS_RAN_STATUSES:
            await self._score(task, await self.observer.history(rollout), result)
        result.name_failure(last_model_error(rollout.log))
        result.calls = call_stats(rollout.log)
        if made_no_model_calls(status, result.calls):
            result.no_model_calls = True
            rollout.log.append(EventKind.NOTE, no_model_calls_note())
        release()  # the rollout is over: its final commit need not hold a place
        await self._final_commit(result.session_id, rollout.log, result, limit=hit)

    async def _score(self, task: Task, events: list[Event], result: RolloutResult) -> None:
        if result.answer is None:
            result.reward = 0.0
            return
        try:
            result.reward, result.components = await self.scorer.score(task, result.answer, events)
        except Exception as exc:  # noqa: BLE001
            # A crashing reward function is this rollout's error, recorded, not the run's.
            result.status, result.reward = "error", None
            result.error = f"reward: {type(exc).__name__}: {exc}"
            result.error_code, result.error_message = REWARD_ERROR, result.error

    async def _final_commit(
        self, session_id: str | None, events: EventLog | None, result: RolloutResult,
        *, limit: str | None = None,
    ) -> None:  # fmt: skip
        """Append the reward and status events and commit them with status and reward."""
        if session_id is None:
            return
        await self.observer.settle(session_id)
        events = EventLog() if events is None else events
        if result.reward is not None:
            events.append(EventKind.REWARD, {"reward": result.reward, **result.components})
        events.append(EventKind.STATUS, result.status_payload(limit))
        self._unsaved.ended(session_id, events, result.status, result.reward)
        if self.store_failure is not None:
            return  # the store gave up: kept for the unsaved-sessions file
        try:
            await self.store.commit(session_id, events, status=result.status, reward=result.reward)
        except StoreError as err:
            if self._store_failed(err):
                return
            log.warning("final commit of session %s failed: %s", session_id, err)
            result.status, result.error = "error", f"store: {err}"
            result.error_code, result.error_message = err.code, err.message
            result.commit_failed = True
        self._unsaved.saved(session_id)


def _stale_error(rollout: Rollout) -> str:
    """The stale rollout's error text: the refusal the harness got."""
    refused = last_model_error(rollout.log)
    return f"policy_stale: {refused[1] if refused else 'the rollout began too many versions ago'}"
