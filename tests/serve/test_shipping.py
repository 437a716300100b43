"""SQLite workers ship their writes: only new events travel, the supervisor's store writes."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from rollouts.runnerkit import run_placed
from rolltap.events import EventKind, EventLog
from rolltap.serve.protocol import Channel, Msg
from rolltap.serve.supervisor.shipped_store_host import ShippedStoreHost
from rolltap.serve.worker.session_store import ShippedStore, StoreRpc
from rolltap.sim import Simulator
from rolltap.store import Store


async def _answer(channel: Channel, host: ShippedStoreHost, frames: list[dict[str, Any]]) -> None:
    """The supervisor's side: answer every store frame through the host."""
    while (message := await channel.recv()) is not None:
        frames.append(message)
        reply = await host.answer(message)
        if reply is not None:
            await channel.send(reply)


async def _worker_side(rpc: StoreRpc, channel: Channel) -> None:
    while (message := await channel.recv()) is not None:
        assert message["type"] == Msg.STORE_REPLY
        rpc.resolve(message)


async def test_commits_ship_only_new_events_and_rewinds_from_the_cut(tmp_path: Path) -> None:
    left, right = socket.socketpair()
    worker, supervisor = await Channel.over(left), await Channel.over(right)
    frames: list[dict[str, Any]] = []
    async with await Store.open(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = await store.create_run("shipped")
        rpc = StoreRpc(worker)
        shipped = ShippedStore(rpc)
        async with asyncio.TaskGroup() as group:
            answering = group.create_task(_answer(supervisor, ShippedStoreHost(store), frames))
            reading = group.create_task(_worker_side(rpc, worker))
            session = await shipped.create_session(run.id, session_id="s1", task={"k": 1})
            log = EventLog()
            for i in range(3):
                log.append(EventKind.NOTE, {"text": f"n{i}"})
            await shipped.commit(session.id, log, status="running")
            log.append(EventKind.NOTE, {"text": "n3"})
            await shipped.commit(session.id, log)
            log.truncate(2)
            log.append(EventKind.NOTE, {"text": "again"})
            result = await shipped.commit(session.id, log, status="completed", reward=1.0)
            shipped.forget(session.id)
            await worker.aclose()
            await supervisor.aclose()
            for task in (answering, reading):
                task.cancel()
        events = await store.events("s1")
        info = await store.get_session("s1")
    commits = [f for f in frames if f["op"] == "commit"]
    assert [(f["start"], len(f["events"])) for f in commits] == [(0, 3), (3, 1), (2, 1)]
    assert (result.n_events, result.replaced) == (3, True)
    assert [e.payload["text"] for e in events] == ["n0", "n1", "again"]
    assert (info.status, info.reward, info.n_events) == ("completed", 1.0, 3)
    assert frames[-1]["op"] == "forget"


async def test_a_shipped_runner_stores_its_node_and_worker(sim: Simulator, tmp_path: Path) -> None:
    left, right = socket.socketpair()
    worker, supervisor = await Channel.over(left), await Channel.over(right)
    frames: list[dict[str, Any]] = []
    async with await Store.open(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = await store.create_run("shipped")
        rpc = StoreRpc(worker)
        async with asyncio.TaskGroup() as group:
            answering = group.create_task(_answer(supervisor, ShippedStoreHost(store), frames))
            reading = group.create_task(_worker_side(rpc, worker))
            shipped = ShippedStore(rpc)
            await run_placed(sim, shipped, run.id, 3, node_id="node-c", worker_id="w2")
            await worker.aclose()
            await supervisor.aclose()
            for task in (answering, reading):
                task.cancel()
        sessions = await store.list_sessions(run.id)
    created = [f for f in frames if f["op"] == "create_session"]
    assert [(f["node_id"], f["worker_id"]) for f in created] == [("node-c", "w2")] * 3
    assert [(s.status, s.node_id, s.worker_id) for s in sessions] == [
        ("completed", "node-c", "w2")
    ] * 3
