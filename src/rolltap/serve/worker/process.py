"""A serve worker process: its own event loop, gateway, model-client pool and runners.

Started by the supervisor as ``python -m rolltap.serve.worker.process FD``, where ``FD`` is its
end of a socket pair. The first frame on it is the :class:`WorkerConfig`; the worker
answers ``ready`` once its gateway listens, then runs each ``submit`` as a job until
``shutdown`` or until the supervisor goes away (end of stream): then it cancels what
is left, lets the store flush, and exits. Frames are read for the whole life of the
process, because on SQLite even the last flush waits for the supervisor's replies.

Signals are the supervisor's business: SIGINT and SIGTERM (a Ctrl-C or a ``kill`` of
the whole process group) are ignored here, so the supervisor decides how a drain ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
import sys
from contextlib import AsyncExitStack
from typing import Any

from rolltap.errors import StoreError
from rolltap.gateway import Gateway
from rolltap.otel import open_tracer
from rolltap.proc.gc_tuning import tune_gc_for_gateway
from rolltap.proc.loop import run as run_loop
from rolltap.rollouts.harness_http import harness_session
from rolltap.rollouts.harness_loader import preload_harnesses
from rolltap.rollouts.recorder import SessionStore, StoreRecorder
from rolltap.serve.protocol import Channel, ChannelClosedError, Msg, WorkerConfig, store_report
from rolltap.serve.worker.heartbeat import Heartbeat
from rolltap.serve.worker.policy import apply_policy
from rolltap.serve.worker.rollouts import JobRun, JobRunFactory
from rolltap.serve.worker.session_store import ShippedStore, StoreRpc
from rolltap.store import Store

__all__ = ["Worker", "main", "serve_channel"]

log = logging.getLogger("rolltap.serve.worker")

#: how often a worker that writes its own store looks at its writer's health
STORE_WATCH_S = 0.2


class Worker:
    """Runs jobs for the supervisor on the other end of ``channel``."""

    def __init__(self, config: WorkerConfig, channel: Channel, *, node: str | None = None) -> None:
        self.config, self.channel = config, channel
        #: the machine (a host name, or a Ray node id) this worker runs on
        self.node = node or socket.gethostname()
        self.rpc = StoreRpc(channel)
        self.jobs: dict[str, JobRun] = {}
        self.gateway: Gateway | None = None
        self.store: Store | None = None  # when this worker writes the store itself
        self._factory: JobRunFactory | None = None
        self._group: asyncio.TaskGroup | None = None
        self._stopping = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    async def run(self) -> None:
        """Set up, serve until told to stop, then close everything in order."""
        async with asyncio.TaskGroup() as tasks:
            receiver = tasks.create_task(self._receive())
            try:
                async with AsyncExitStack() as stack:
                    self._factory = await self._open(stack)
                    await self._serve()
            finally:
                receiver.cancel()

    async def _open(self, stack: AsyncExitStack) -> JobRunFactory:
        store: SessionStore
        if self.config.store_url is not None:
            self.store = await stack.enter_async_context(
                await Store.open(
                    self.config.store_url,
                    reconnect_timeout=self.config.store_unavailable_timeout_s,
                )
            )
            store = self.store
        else:
            store = ShippedStore(self.rpc)
        recorder = await stack.enter_async_context(StoreRecorder(store, final_commit=False))
        # the worker's gateway listens on ephemeral loopback ports; its admin API is
        # never used, so it keeps a random admin token nobody is told
        # the gateway trims memory on the heartbeat's cadence (one trimmer for the process)
        trim_s = self.config.stats_interval_s if self.config.trim else 0.0
        settings = self.config.gateway.model_copy(
            update={"port": 0, "admin_token": None, "trim_interval_s": trim_s}
        )
        tracer = await stack.enter_async_context(
            open_tracer(self.config.otel, content=self.config.otel_content)
        )
        self.gateway = await stack.enter_async_context(
            Gateway(self.config.endpoints, settings, observers=[recorder], tracer=tracer)
        )
        # import the built-in harnesses its rollouts will name (each brings its SDK: a
        # second or more of CPU) before saying ready, off the loop: else the first
        # rollouts of a wave wait for it on a blocked loop, after their clock started
        await asyncio.to_thread(preload_harnesses, self.config.preload_harnesses)
        # one TLS context and one set of connections for every rollout's harness: a
        # context loads the CA store (~40 ms of CPU and much memory), far too much each
        http = await stack.enter_async_context(harness_session(ssl.create_default_context()))
        return JobRunFactory(self.config, self.gateway, store, recorder, http=http, node=self.node)

    async def _serve(self) -> None:
        assert self.gateway is not None
        heartbeat = Heartbeat(
            self.channel, self.config.stats_interval_s, trimmer=self.gateway.trimmer,
            snapshot=self.snapshot,
        )  # fmt: skip
        async with asyncio.TaskGroup() as group:
            beats = [group.create_task(heartbeat.beat_forever())]
            if self.store is not None:
                beats.append(group.create_task(self._watch_store(self.store)))
            self._group = group
            await self.channel.send({"type": Msg.READY, "pid": os.getpid(), "node": self.node})
            await self._stopping.wait()
            for job in list(self.jobs.values()):
                job.cancel()
            # keep beating while the last jobs unwind: the supervisor is still watching
            await self._idle.wait()
            self._group = None
            for task in beats:
                task.cancel()

    def _store_report(self) -> dict[str, Any] | None:
        if self.store is None:
            return None
        return store_report(self.store.stats(), self.store.pending_max_bytes)

    async def _watch_store(self, store: Store) -> None:
        """Tell the supervisor at once when this worker's writer loses or regains the
        database, passes its pending-bytes bound or first finds it full (later, the
        stats frames carry how long ago): admission depends on it."""
        last: tuple[bool, bool, bool] | None = None
        while True:
            report = store_report(store.stats(), store.pending_max_bytes)
            now = (report["unavailable_s"] is None, bool(report["over"]), report["full_s"] is None)
            if now != last:
                try:
                    await self.channel.send({"type": Msg.STORE_STATE, **report})
                except ChannelClosedError:
                    return  # the supervisor is gone; the receiver winds the worker down
                last = now
            await asyncio.sleep(STORE_WATCH_S)

    async def _receive(self) -> None:
        while (message := await self.channel.recv()) is not None:
            kind = message["type"]
            if kind == Msg.SUBMIT:
                self._start(message)
            elif kind == Msg.CANCEL:
                if (job := self.jobs.get(message["job"])) is not None:
                    job.cancel()
            elif kind == Msg.STORE_REPLY:
                self.rpc.resolve(message)
            elif kind == Msg.POLICY:
                self._policy(message)
            elif kind == Msg.SHUTDOWN:
                self._stopping.set()
            else:
                log.warning("unknown frame %r", kind)
        # the supervisor is gone: nothing will answer the store or read our results
        self.rpc.fail_all(StoreError("the supervisor went away"))
        self._stopping.set()

    def _policy(self, message: dict[str, Any]) -> None:
        """Apply a policy change off the receive loop (a ``drain`` pause waits for the calls
        in flight, whose store writes need this loop's replies). Tasks start in the order
        their frames came, and each change is made in its task's first step: a ``sync``
        takes effect before the ``submit`` frames behind it."""
        if self._group is None or self.gateway is None or self._stopping.is_set():
            reply = {"type": Msg.POLICY_REPLY, "id": message.get("id"), "ok": False,
                     "error": {"code": "service_draining", "status": 503,
                               "message": "the worker is stopping"}}  # fmt: skip
            with contextlib.suppress(ChannelClosedError):
                self.channel.send_nowait(reply)
            return
        self._group.create_task(self._apply_policy(self.gateway, message))

    async def _apply_policy(self, gateway: Gateway, message: dict[str, Any]) -> None:
        reply = await apply_policy(gateway, self.config.endpoints, message)
        try:
            await self.channel.send(reply)
        except ChannelClosedError:
            log.warning("policy reply undelivered: the supervisor is gone")

    def _start(self, message: dict[str, Any]) -> None:
        if self._group is None or self._factory is None or self._stopping.is_set():
            log.warning("submit of %s after shutdown: ignored", message.get("job"))
            return
        job = self._factory.make(message)
        self.jobs[job.id] = job
        self._idle.clear()
        self._group.create_task(self._run(job))

    async def _run(self, job: JobRun) -> None:
        try:
            result = await job.run()
        finally:
            self.jobs.pop(job.id, None)
            job.store.forget(job.session_id)
            if not self.jobs:
                self._idle.set()
        try:
            await self.channel.send({"type": Msg.RESULT, "job": job.id, "result": result})
        except ChannelClosedError:
            log.warning("result of %s undelivered: the supervisor is gone", job.id)

    def snapshot(self) -> dict[str, Any]:
        """The worker-side numbers of a heartbeat (the rest are process readings)."""
        out: dict[str, Any] = {"inflight": len(self.jobs)}
        if (report := self._store_report()) is not None:
            out["store"] = report
        if self.gateway is not None:
            snap = self.gateway.snapshot()
            out.update(
                rollouts=snap["rollouts"], intercepts=snap["intercepts"], pool=snap["pool"],
                servers=snap["servers"], totals=snap["totals"],
            )  # fmt: skip
            out["policy"] = snap["policy"]  # each endpoint's version, pause, counters
            if snap["replicas"]:  # this worker's own balance over an endpoint's replicas
                out["replicas"] = snap["replicas"]
        return out


async def serve_channel(channel: Channel, *, node: str | None = None) -> None:
    """Be a worker on ``channel`` (its first frame is the config) until told to stop or
    until the supervisor goes away; closes the channel. What every launcher runs."""
    try:
        first = await channel.recv()
        if first is None or first.get("type") != Msg.CONFIG:
            raise ChannelClosedError("expected a config frame first")
        config = WorkerConfig.model_validate(first["config"])
        logging.basicConfig(
            level=logging.WARNING, format=f"rolltap worker {config.index}: %(message)s"
        )
        await Worker(config, channel, node=node).run()
    finally:
        await channel.aclose()


async def _main(fd: int) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        # a handler, not SIG_IGN: an ignored disposition would be inherited by harness
        # subprocesses, which must stay killable
        loop.add_signal_handler(signum, lambda: None)
    await serve_channel(await Channel.over(socket.socket(fileno=fd)))


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``python -m rolltap.serve.worker.process FD``."""
    args = sys.argv[1:] if argv is None else argv
    tune_gc_for_gateway()
    run_loop(_main(int(args[0])))


if __name__ == "__main__":
    main()
