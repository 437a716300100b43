"""The worker processes: start them, read their frames, watch their heartbeats, replace them.

A worker is lost when its process exits (its channel reaches end of stream), when its
heartbeat is ``heartbeat_timeout_s`` late (a blocked loop: it is killed), or when one
of its rollouts overruns its deadline by far (a broken runner: it is killed). Its
rollouts are handed to the owner to be stored and reported, and a replacement starts
at once in the same slot. A supervisor that stalled itself judges no one that round:
its own late wake-up would otherwise read as everyone's silence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from rolltap.errors import RolltapError, WorkerLostError
from rolltap.serve.launch.child_process import Launcher
from rolltap.serve.protocol import ChannelClosedError, Msg, WorkerConfig
from rolltap.serve.supervisor.placement import WorkerHandle
from rolltap.serve.supervisor.shipped_store_host import ShippedStoreHost

__all__ = ["WorkerSlots", "WorkerSlotsOwner"]

log = logging.getLogger("rolltap.serve.supervisor")

_SHUTDOWN_GRACE_S = 30.0


class WorkerSlotsOwner(Protocol):
    """Who the slots reports results and losses to (the supervisor)."""

    def on_result(self, handle: WorkerHandle, message: dict[str, Any]) -> None: ...

    async def on_lost(self, handle: WorkerHandle, status: str, reason: str) -> None: ...

    def on_ready(self, handle: WorkerHandle) -> None:
        """``handle`` just said ready; what is sent here comes before its first rollout."""

    def on_policy_reply(self, handle: WorkerHandle, message: dict[str, Any]) -> None: ...

    def on_gone(self, handle: WorkerHandle) -> None:
        """``handle`` was lost just now (its rollouts are settled later: ``on_lost``)."""


class WorkerSlots:
    """``workers`` processes in fixed slots, each replaced when lost."""

    def __init__(
        self,
        *,
        workers: int,
        launcher: Launcher,
        worker_config: Callable[[int], WorkerConfig],
        owner: WorkerSlotsOwner,
        store_host: ShippedStoreHost | None,
        tasks: asyncio.TaskGroup,
        heartbeat_timeout_s: float,
        start_timeout_s: float,
    ) -> None:
        self.slots: list[WorkerHandle | None] = [None] * workers
        self.launcher = launcher
        self._worker_config, self._owner, self.store_host = worker_config, owner, store_host
        self._tasks = tasks
        self.heartbeat_timeout_s, self.start_timeout_s = heartbeat_timeout_s, start_timeout_s
        self.closing = False
        self.restarts = self.lost = 0
        self._background: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[WorkerSlots], bool]) -> None:
        """Wait until ``predicate(slots)`` holds, re-checked on every state or stats change."""
        while not predicate(self):
            await self._changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker and wait until each is ready; then watch them."""
        launched = await asyncio.gather(
            *(self._launch(index, 0) for index in range(len(self.slots))), return_exceptions=True
        )
        for outcome in launched:
            if isinstance(outcome, BaseException):
                raise outcome
        self._own(self._monitor())

    async def shutdown(self) -> None:
        """Ask every worker to finish and exit; kill whoever is not gone in time."""
        self.closing = True
        for task in self._background:
            task.cancel()
        handles = [h for h in self.slots if h is not None]
        for handle in handles:
            if handle.state in ("starting", "ready"):
                handle.state = "stopping"
                try:
                    await handle.send({"type": Msg.SHUTDOWN})
                except ChannelClosedError:
                    handle.kill()
        async with asyncio.TaskGroup() as group:
            for handle in handles:
                group.create_task(self._stop(handle))

    @staticmethod
    async def _stop(handle: WorkerHandle) -> None:
        try:
            async with asyncio.timeout(_SHUTDOWN_GRACE_S):
                await handle.wait()
        except TimeoutError:
            log.warning("worker %d did not exit in time: killed", handle.index)
            handle.kill()
            await handle.wait()
        await handle.aclose()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self._tasks.create_task(coro)

    def _own(self, coro: Coroutine[Any, Any, Any]) -> None:
        """A background task that shutdown cancels (monitor, replacements)."""
        task = self._spawn(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _launch(self, index: int, generation: int) -> WorkerHandle:
        handle = WorkerHandle(index, generation)
        self.slots[index] = handle
        self._notify()
        try:
            await handle.spawn(self._worker_config(index), self.launcher)
            self._spawn(self._pump(handle))
            async with asyncio.timeout(self.start_timeout_s):
                await handle.ready.wait()
            if handle.state != "ready":
                raise WorkerLostError(f"worker {index} exited while starting")
        except TimeoutError:
            handle.state = "lost"
            handle.kill()
            raise WorkerLostError(
                f"worker {index} not ready in {self.start_timeout_s:g} s"
            ) from None
        except BaseException:
            handle.state = "lost"
            handle.kill()
            raise
        return handle

    async def _replace(self, index: int, generation: int) -> None:
        delay = 0.5
        while not self.closing:
            try:
                await self._launch(index, generation)
            except (RolltapError, OSError) as err:
                log.warning(
                    "replacing worker %d failed (%s); retrying in %.1f s", index, err, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            self.restarts += 1
            return

    # -- frames ------------------------------------------------------------------------

    async def _pump(self, handle: WorkerHandle) -> None:
        assert handle.channel is not None
        try:
            while (message := await handle.channel.recv()) is not None:
                handle.seen()
                self._on_frame(handle, message)
                self._notify()
        except ChannelClosedError as err:
            log.warning("worker %d sent a bad frame: %s", handle.index, err)
        if handle.state == "starting":
            handle.state = "lost"
            handle.ready.set()  # wakes _launch, which reports the failed start
        elif handle.state == "ready":
            self.lose(handle, "exited")

    def _on_frame(self, handle: WorkerHandle, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == Msg.STATS:
            handle.stats = message
            if isinstance(message.get("store"), dict):  # fresher numbers, same health
                handle.store_state = message["store"]
            if isinstance(message.get("policy"), dict):
                handle.policy = message["policy"]
        elif kind == Msg.RESULT:
            self._owner.on_result(handle, message)
        elif kind == Msg.STORE_STATE:
            handle.store_state = {k: v for k, v in message.items() if k != "type"}
        elif kind == Msg.POLICY_REPLY:
            self._owner.on_policy_reply(handle, message)
        elif kind == Msg.STORE:
            task = self._spawn(self._store(handle, message))
            handle.store_tasks.add(task)
            task.add_done_callback(handle.store_tasks.discard)
        elif kind == Msg.READY and handle.state == "starting":
            handle.state = "ready"
            handle.node = message.get("node") if isinstance(message.get("node"), str) else None
            handle.remote_pid = message.get("pid") if isinstance(message.get("pid"), int) else None
            self._owner.on_ready(handle)
            handle.ready.set()
        else:
            log.warning("worker %d: unexpected frame %r", handle.index, kind)

    async def _store(self, handle: WorkerHandle, message: dict[str, Any]) -> None:
        if self.store_host is None:
            reply: dict[str, Any] | None = {
                "type": Msg.STORE_REPLY, "id": message.get("id"), "ok": False,
                "error": {"code": "store_error", "message": "workers write their own store"},
            }  # fmt: skip
        else:
            reply = await self.store_host.answer(message)
        if reply is not None:
            try:
                await handle.send(reply)
            except ChannelClosedError:
                return  # the worker died waiting; its loss settles its rollouts

    # -- losses ------------------------------------------------------------------------

    def lose(self, handle: WorkerHandle, reason: str, *, status: str = "worker_lost") -> None:
        """Kill ``handle`` and settle its rollouts as ``status``; idempotent."""
        if handle.state in ("lost", "stopping"):
            return
        handle.state, handle.lost_reason = "lost", reason
        handle.kill()
        self._notify()
        self.lost += 1
        log.warning("worker %d (pid %s) %s", handle.index, handle.pid, reason)
        self._owner.on_gone(handle)
        if not self.closing:
            self._own(self._replace(handle.index, handle.generation + 1))
        self._spawn(self._settle(handle, status, reason))

    async def _settle(self, handle: WorkerHandle, status: str, reason: str) -> None:
        code = await handle.wait()
        if handle.store_tasks:
            # its last shipped writes come first, so the final status lands after them
            await asyncio.wait(set(handle.store_tasks))
        ended = handle.proc.describe_exit(code) if handle.proc is not None else "never started"
        detail = f"worker {handle.index} (pid {handle.pid}) {reason}; {ended}"
        await self._owner.on_lost(handle, status, detail)
        await handle.aclose()

    async def _monitor(self) -> None:
        loop = asyncio.get_running_loop()
        period = self.heartbeat_timeout_s / 4
        due = loop.time()
        while True:
            due += period
            await asyncio.sleep(max(0.0, due - loop.time()))
            now = loop.time()
            if now - due > period:
                due = now  # we stalled ourselves: the silence we would see is ours
                continue
            for handle in self.slots:
                if handle is not None and handle.state == "ready":
                    self._judge(handle, now)

    def _judge(self, handle: WorkerHandle, now: float) -> None:
        silent = now - handle.last_seen
        if silent > self.heartbeat_timeout_s:
            self.lose(handle, f"missed its heartbeat (silent {silent:.1f} s)")
            return
        late = next((job for job in handle.jobs.values() if now > job.deadline), None)
        if late is not None:
            self.lose(handle, f"did not finish rollout {late.id} by its deadline")

    # -- placement ---------------------------------------------------------------------

    def ready(self) -> list[WorkerHandle]:
        return [h for h in self.slots if h is not None and h.state == "ready"]
