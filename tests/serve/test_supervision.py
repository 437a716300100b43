"""Supervision: dead and stuck workers are replaced, their rollouts end ``worker_lost``."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from local.localkit import read_fifo, wait_gone
from rolltap.proc.memory import Trimmer, readings
from rolltap.serve import RolloutSpec, ServeClient
from rolltap.serve.supervisor.worker_slots import WorkerSlots
from rolltap.sim import Simulator
from rolltap.store import Store, StoreFencedError
from serve.servekit import TOKEN, ServiceFactory, chat_spec, gated_spec


def _replaced(index: int, old_pid: int | None) -> Callable[[WorkerSlots], bool]:
    def check(fleet: WorkerSlots) -> bool:
        handle = fleet.slots[index]
        return handle is not None and handle.state == "ready" and handle.pid != old_pid

    return check


async def test_kill_9_mid_batch_loses_only_that_workers_rollouts(
    serve_store: str, start_service: ServiceFactory, sim: Simulator
) -> None:
    # serve_store first: set up before the service and so dropped only after it closed
    # (closing releases the run's lease, a write to that database)
    async with await Store.open(serve_store, upgrade=True):
        pass  # a server database gets its schema, as `rolltap db upgrade` would
    service = await start_service(store=serve_store)
    fleet = service.supervisor.worker_slots
    async with ServeClient(service.url, TOKEN) as client:
        async with client.batch([gated_spec(f"t{i}", "hold") for i in range(4)]) as batch:
            await sim.wait_for(lambda stats: stats.in_flight == 4)
            placed = {rid: (await client.rollout(rid))["worker"] for rid in batch.rollouts}
            victim = fleet.slots[0]
            assert victim is not None and victim.pid is not None
            victim_pid = victim.pid
            os.kill(victim_pid, signal.SIGKILL)
            stream = aiter(batch)
            lost = [await anext(stream), await anext(stream)]  # the gate is still shut
            sim.gate("hold").open()
            finished = [r async for r in stream]
        await fleet.wait_until(_replaced(0, victim.pid))
        again = [r async for r in client.submit_batch([chat_spec(f"n{i}") for i in range(4)])]
    on_victim = {rid for rid, worker in placed.items() if worker == 0}
    assert len(on_victim) == 2
    assert {r.id for r in lost} == on_victim
    assert {r.status for r in lost} == {"worker_lost"}
    # attributed to the killed worker (its exit status is racy to read under load)
    errors = [r.error or "" for r in lost]
    assert all(f"pid {victim_pid}" in error for error in errors), errors
    assert {r.status for r in finished} == {"completed"}
    assert {(r.status, r.worker) for r in again} == {("completed", 0), ("completed", 1)}
    async with await Store.open(serve_store) as store:
        for result in lost + finished:
            session = await store.get_session(result.id)
            events = await store.events(result.id)
            assert session.status == result.status, result
            assert (events[-1].kind, events[-1].payload["status"]) == ("status", result.status)


async def test_a_blocked_loop_misses_its_heartbeat_and_is_replaced(
    start_service: ServiceFactory,
) -> None:
    # long enough that a healthy worker on a loaded 2-core machine never misses it
    service = await start_service(heartbeat_timeout_s=5.0)
    fleet = service.supervisor.worker_slots
    before = [handle.pid for handle in fleet.ready()]
    async with ServeClient(service.url, TOKEN) as client:
        stuck = await client.submit(chat_spec("stuck", block_loop_s=600.0))
        assert stuck.worker is not None
        await fleet.wait_until(_replaced(stuck.worker, before[stuck.worker]))
        after = await client.submit(chat_spec("after"))
    assert stuck.status == "worker_lost"
    assert "missed its heartbeat" in (stuck.error or "")
    assert after.status == "completed"
    assert fleet.restarts == 1


async def test_trim_runs_on_a_thread_that_is_not_the_loops() -> None:
    trimmer = Trimmer()
    report = await trimmer.trim()
    assert report.loop_thread == threading.get_ident()
    assert report.thread != report.loop_thread
    assert readings().rss > 0


async def test_heartbeats_report_stats_and_trims_off_the_loop(
    start_service: ServiceFactory,
) -> None:
    service = await start_service(workers=1)
    fleet = service.supervisor.worker_slots

    def trimmed(fleet: WorkerSlots) -> bool:
        handle = fleet.slots[0]
        return handle is not None and "thread" in handle.stats.get("trim", {})

    await fleet.wait_until(trimmed)
    handle = fleet.slots[0]
    assert handle is not None
    stats = handle.stats
    trim = stats["trim"]
    if not trim["available"]:
        pytest.skip("no malloc_trim in this C library")
    assert trim["thread"] != trim["loop_thread"]
    assert trim["count"] >= 1
    assert stats["pid"] == handle.pid
    assert stats["rss"] > 0 and stats["threads"] >= 1 and stats["open_files"] > 0
    assert stats["sockets"] >= 2  # the supervisor channel and the gateway's listener
    assert (stats["inflight"], stats["intercepts"]) == (0, 0)
    assert stats["pool"]["max_clients"] == 64
    assert stats["loop_lag_ms"] >= 0


async def test_a_killed_workers_cmd_harness_dies_with_it(
    start_service: ServiceFactory, tmp_path: Path
) -> None:
    """``kill -9`` of a worker mid-rollout: its ``--cmd`` shell and what the shell started
    are gone too (their pids come through a FIFO), and the rollout ends ``worker_lost``."""
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    service = await start_service(workers=1)
    (worker,) = service.supervisor.worker_slots.ready()
    assert worker.pid is not None
    spec = RolloutSpec(task={"id": "t", "prompt": "hi"},
                       cmd=f"sleep 300 & echo $$ $! > {fifo}; wait")  # fmt: skip
    async with ServeClient(service.url, TOKEN) as client, asyncio.TaskGroup() as group:
        result = group.create_task(client.submit(spec))
        pids = await asyncio.to_thread(read_fifo, fifo, worker.pid)
        shell, grandchild = (int(pid) for pid in pids.split())
        os.kill(worker.pid, signal.SIGKILL)
    assert result.result().status == "worker_lost"
    assert await asyncio.to_thread(wait_gone, shell, 10)
    assert await asyncio.to_thread(wait_gone, grandchild, 10)


async def test_a_run_taken_over_refuses_the_services_writes(
    serve_store: str, start_service: ServiceFactory, sim: Simulator
) -> None:
    # on a server database each worker writes itself, fenced by its supervisor's epoch;
    # on SQLite the supervisor writes: either way a newer owner's takeover stops them
    async with await Store.open(serve_store, upgrade=True):
        pass
    service = await start_service(store=serve_store)
    client = ServeClient(service.url, TOKEN)
    async with client, client.batch([gated_spec(f"t{i}", "hold") for i in range(2)]) as batch:
        await sim.wait_for(lambda stats: stats.in_flight == 2)
        async with await Store.open(serve_store) as other:
            lease = await other.acquire_lease(batch.run_id, owner="other", ttl_s=60.0)
            assert lease.epoch == 2 and lease.interrupted == 2
            sim.gate("hold").open()
            results = [r async for r in batch]
            async with await Store.open(serve_store) as stale:
                stale.hold_epoch(batch.run_id, lease.epoch - 1)
                with pytest.raises(StoreFencedError):
                    await stale.create_session(batch.run_id, session_id="late")
            assert (await other.create_session(batch.run_id)).status == "pending"
    assert {r.error_code for r in results} == {"store_fenced"}, results
    async with await Store.open(serve_store) as store:
        for result in results:
            # the takeover stored them interrupted; the old owner's final commit never landed
            assert (await store.get_session(result.id)).status == "interrupted"
            assert "status" not in [e.kind for e in await store.events(result.id)]
