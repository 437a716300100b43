"""``rolltap serve`` on SQLite through store trouble: the supervisor's one writer faulted.

On SQLite the supervisor owns the only writer and the workers ship their writes to it
(:class:`~rolltap.serve.worker.session_store.ShippedStore`). Faults are injected into that writer
(``Service(store_hooks=...)``, test-only): transient ones make the store unreachable for
a while (new batches get ``503 store_unavailable``, the rollouts in flight go on, then
everything is stored exactly once) or past ``store_unavailable_timeout_s`` (the sessions
go to the unsaved files, which import once); a held writer fills the pending-bytes bound
(new batches refused); a capped file fills up (``507 store_full``, the file intact).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from clikit import arolltap_ok
from rolltap.serve import RolloutSpec, ServeClient, Service
from rolltap.sim import Simulator
from rolltap.store import InjectedFault, Store, WriterHooks
from rolltap.store.errors import StoreFullError, StoreUnavailableError
from rolltap.store.ops import WriteOp
from rolltap.store.writer_state import PENDING_ENV
from serve.servekit import TOKEN, ServiceFactory, chat_spec
from serve.test_serve_outage import KINDS, _metrics, assert_stored_once

N = 40


class Outage(WriterHooks):
    """While ``down``, every transaction fails before COMMIT as a lost connection would."""

    def __init__(self) -> None:
        self.down = False
        self.faults = 0

    async def before_commit(self, ops: Sequence[WriteOp]) -> None:
        if self.down:
            self.faults += 1
            raise InjectedFault("injected outage", transient=True)


class Hold(WriterHooks):
    """Once ``armed``, the writer's next transaction waits inside until ``opened``."""

    def __init__(self) -> None:
        self.armed = False
        self.entered, self.opened = asyncio.Event(), asyncio.Event()

    async def before_commit(self, ops: Sequence[WriteOp]) -> None:
        if self.armed and not self.opened.is_set():
            self.entered.set()
            await self.opened.wait()


def held_specs(count: int, gate: str, pad: int = 0) -> list[RolloutSpec]:
    """Three-call rollouts whose second call the simulator holds at ``gate``."""
    return [
        RolloutSpec(
            task={"id": f"t{i}", "prompt": "p", "answer": "x", "info": {"gate": gate, "pad": pad}},
            harness="serve.serve_harnesses:three_calls",
        )
        for i in range(count)
    ]


def _store_state(service: Service) -> dict[str, Any]:
    state: dict[str, Any] = service.supervisor.status()["store"]
    return state


def _url(service: Service) -> str:
    url = service.config.store
    assert url is not None  # the fixture names the SQLite file
    return url


async def _until_store(service: Service, key: str, value: Any) -> None:
    await service.supervisor.worker_slots.wait_until(lambda _: _store_state(service)[key] == value)


async def _start(start: ServiceFactory, hooks: WriterHooks, **overrides: Any) -> Service:
    return await start(store_hooks=hooks, max_inflight=32, test_hooks=False, **overrides)


@pytest.mark.timeout(300)
async def test_supervisor_writer_faulted_mid_batch_stores_every_rollout_once(
    start_service: ServiceFactory, sim: Simulator
) -> None:
    hooks = Outage()
    service = await _start(start_service, hooks)
    async with ServeClient(service.url, TOKEN) as client:
        async with client.batch(held_specs(N, "fault")) as batch:
            await sim.wait_for(lambda s: s.in_flight == N, timeout=60)  # all past turn 1
            hooks.down = True
            sim.gate("fault").open()  # the rollouts in flight go on
            await sim.wait_for(lambda s: s.completed == 3 * N, timeout=60)
            await service.supervisor.worker_slots.wait_until(
                lambda _: (
                    service.supervisor.store.stats().pending_commits > 0
                    and _store_state(service)["unavailable_s"] is not None
                )
            )
            with pytest.raises(StoreUnavailableError) as refused:
                await client.submit(chat_spec("late"))
            during = (await client.status())["store"]
            hooks.down = False
            results = [r async for r in batch]
        await _until_store(service, "available", True)
        after = await client.submit(chat_spec("after"))  # admitted again
    assert hooks.faults >= 1
    assert refused.value.code == "store_unavailable" and refused.value.retry_after == 5.0
    assert during["available"] is False and during["pending_commits"] > 0
    assert during["rejected"] >= 1
    assert {(r.status, r.error) for r in results} == {("completed", None)}
    assert after.status == "completed"
    await assert_stored_once(_url(service), batch.run_id, results)


@pytest.mark.timeout(300)
async def test_supervisor_writer_faulted_past_the_timeout_unsaved_files_import_once(
    start_service: ServiceFactory, sim: Simulator, tmp_path: Path
) -> None:
    hooks, count = Outage(), 20
    service = await _start(
        start_service, hooks, store_unavailable_timeout_s=3.0, unsaved_dir=str(tmp_path)
    )
    url = _url(service)
    async with ServeClient(service.url, TOKEN) as client, client.batch(
        held_specs(count, "away")
    ) as batch:  # fmt: skip
        await sim.wait_for(lambda s: s.in_flight == count, timeout=60)
        hooks.down = True
        sim.gate("away").open()
        results = [r async for r in batch]  # once the supervisor's writer gave up
    hooks.down = False
    await service.aclose()  # the CLI below writes the file: the service lets it go
    assert {r.error_code for r in results} == {"store_unavailable"}
    assert {r.status for r in results} == {"completed"}  # they ran: only the store failed
    files = sorted(await asyncio.to_thread(tmp_path.glob, f"rolltap-unsaved-{batch.run_id}-w*"))
    assert files and {r.unsaved_file for r in results} == {str(f) for f in files}
    lines = [orjson.loads(line) for f in files for line in f.read_bytes().splitlines()]
    assert sorted(doc["session"]["id"] for doc in lines) == sorted(r.id for r in results)
    for path in files:
        assert "imported " in await arolltap_ok("sessions", "import", str(path), "--store", url)
        again = await arolltap_ok("sessions", "import", str(path), "--store", url)
        assert "imported 0 session" in again  # twice stores nothing twice
    await assert_stored_once(url, batch.run_id, results)


@pytest.mark.timeout(300)
async def test_commits_held_past_the_pending_bound_refuse_new_batches(
    start_service: ServiceFactory, sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PENDING_ENV, "2048")  # a few sessions' events
    hold = Hold()
    service = await _start(start_service, hold)
    assert service.supervisor.store.pending_max_bytes == 2048
    async with ServeClient(service.url, TOKEN) as client:
        async with client.batch(held_specs(N, "bound")) as batch:
            await sim.wait_for(lambda s: s.in_flight == N, timeout=60)
            hold.armed = True
            sim.gate("bound").open()
            await sim.wait_for(lambda s: s.completed == 3 * N, timeout=60)
            await hold.entered.wait()
            await _until_store(service, "over_pending_bound", True)
            with pytest.raises(StoreUnavailableError) as refused:
                await client.submit(chat_spec("late"))
            during = (await client.status())["store"]
            hold.opened.set()
            results = [r async for r in batch]
        await _until_store(service, "available", True)
        after = await client.submit(chat_spec("after"))
    assert refused.value.code == "store_unavailable"
    assert PENDING_ENV in refused.value.message
    assert during["available"] is False and during["unavailable_s"] is None
    assert during["pending_bytes"] >= 2048
    assert {(r.status, r.error) for r in results} == {("completed", None)}
    assert after.status == "completed"
    await assert_stored_once(_url(service), batch.run_id, results)


@pytest.mark.timeout(300)
async def test_sqlite_full_refuses_new_batches_keeps_sessions_and_the_file_intact(
    start_service: ServiceFactory, sim: Simulator, tmp_path: Path
) -> None:
    db = tmp_path / "full.db"
    url = f"sqlite:///{db}"
    async with await Store.open(url):
        pass  # the schema, then a cap some rollouts' second turns past it
    with sqlite3.connect(db) as conn:
        limit = conn.execute("PRAGMA page_count").fetchone()[0] + 60

    def cap(dbapi_conn: object, _record: object) -> None:
        cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
        cursor.execute(f"PRAGMA max_page_count = {limit}")
        cursor.close()

    event.listen(Engine, "connect", cap)
    try:
        service = await _start(start_service, WriterHooks(), store=url, unsaved_dir=str(tmp_path))
        specs = held_specs(N, "full", pad=16_000)
        async with ServeClient(service.url, TOKEN) as client, client.batch(specs) as batch:
            await sim.wait_for(lambda s: s.in_flight == N, timeout=60)  # sessions made
            sim.gate("full").open()  # the second turns do not all fit
            await _until_store(service, "full", True)
            with pytest.raises(StoreFullError) as refused:
                await client.submit(chat_spec("late"))
            during = (await client.status())["store"]
            metrics = await _metrics(service)
            results = [r async for r in batch]
        await service.aclose()
    finally:
        event.remove(Engine, "connect", cap)
    assert refused.value.code == "store_full" and refused.value.retry_after == 30.0
    assert during["available"] is False and during["full_s"] is not None
    assert "rolltap_serve_store_full 1.0" in metrics
    assert "rolltap_serve_rejected_store_total 1.0" in metrics
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    lost = [r for r in results if r.error_code is not None]
    assert lost and {r.error_code for r in lost} == {"store_full"}
    files = sorted(await asyncio.to_thread(tmp_path.glob, f"rolltap-unsaved-{batch.run_id}-w*"))
    assert {r.unsaved_file for r in lost} == {str(f) for f in files}
    lines = [orjson.loads(line) for f in files for line in f.read_bytes().splitlines()]
    assert sorted(doc["session"]["id"] for doc in lines) == sorted(r.id for r in lost)
    assert all(len(doc["events"]) == len(KINDS) for doc in lines)  # whole logs kept
    async with await Store.open(url) as store:  # the rest stored whole
        for result in results:
            if result.error_code is None:
                kinds = [e.kind for e in await store.events(result.id)]
                assert kinds == KINDS, result.id
