"""``rolltap serve`` through a database outage: a private server stopped mid-batch.

Each worker writes the store itself (PostgreSQL, MariaDB). While the server is down the
rollouts in flight go on and their writes are held; a new batch is refused with the
retryable ``503 store_unavailable``; ``/status`` and ``/metrics`` say so. Once it is back
every rollout is stored exactly once with all its events. Every server here is private
to its test (tests/store/privatedb.py): the machine's shared ones are never stopped.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from clikit import arolltap_ok
from rolltap.serve import RolloutSpec, ServeClient, Service
from rolltap.sim import Simulator
from rolltap.store import Store, upgrade
from rolltap.store.errors import StoreUnavailableError
from serve.servekit import TOKEN, ServiceFactory, chat_spec
from store.privatedb import PrivateServer, private_db, private_postgres

__all__ = ["private_db", "private_postgres"]  # fixtures used by the tests below

N = 60
#: what every ``three_calls`` rollout stores, in order
KINDS = ["model_request", "model_response"] * 3 + ["reward", "status"]
OUTAGE_S = 10.0


def held_specs(count: int, gate: str) -> list[RolloutSpec]:
    """Three-call rollouts whose second call the simulator holds at ``gate``."""
    return [
        RolloutSpec(
            task={"id": f"t{i}", "prompt": "p", "answer": "x", "info": {"gate": gate}},
            harness="serve.serve_harnesses:three_calls",
        )
        for i in range(count)
    ]


async def _metrics(service: Service) -> str:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(service.url + "/metrics", headers=headers) as resp,
    ):
        return await resp.text()


async def _pending_while_down(service: Service) -> None:
    """Wait until the workers' writers report the outage with commits held."""

    def held(fleet: Any) -> bool:
        states = [h.store_state for h in fleet.ready()]
        return (
            any(s.get("unavailable_s") is not None for s in states)
            and sum(int(s.get("pending_commits") or 0) for s in states) > 0
        )

    await service.supervisor.worker_slots.wait_until(held)


async def _available_again(client: ServeClient) -> None:
    """Wait until ``/status`` says the store takes batches again: each writer notices the
    database is back at its next retry (at most 2 s apart), not at the restart."""
    for _ in range(300):
        if (await client.status())["store"]["available"]:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the store never read available: {(await client.status())['store']}")


async def _refused(client: ServeClient) -> StoreUnavailableError:
    with pytest.raises(StoreUnavailableError) as refused:
        await client.submit(chat_spec("late"))
    return refused.value


async def _start_on(start: ServiceFactory, url: str, **overrides: Any) -> Service:
    await upgrade(url)
    return await start(store=url, max_inflight=32, test_hooks=False, **overrides)


async def assert_stored_once(url: str, run_id: str, results: list[Any]) -> None:
    """Every rollout stored once, with all its events, seqs contiguous."""
    async with await Store.open(url) as store:
        sessions = await store.list_sessions(run=run_id)
        assert sorted(s.id for s in sessions) == sorted(r.id for r in results)
        for session in sessions:
            events = await store.events(session.id)
            assert [e.seq for e in events] == list(range(len(events))), session.id
            assert [e.kind for e in events] == KINDS, session.id
            assert (session.status, session.n_events) == ("completed", len(KINDS))
        run = await store.get_run(run_id)
        assert (run.n_sessions, run.n_finished) == (len(results), len(results))


@pytest.mark.timeout(300)
async def test_server_stopped_10s_mid_batch_stores_every_rollout_once(
    private_db: PrivateServer, start_service: ServiceFactory, sim: Simulator
) -> None:
    service = await _start_on(start_service, private_db.url)
    async with ServeClient(service.url, TOKEN) as client:
        async with client.batch(held_specs(N, "outage")) as batch:
            await sim.wait_for(lambda s: s.in_flight == N, timeout=60)  # all past turn 1
            loop = asyncio.get_running_loop()
            await asyncio.to_thread(private_db.stop)
            down_at = loop.time()
            refused = await _refused(client)  # no new batch while it is down
            sim.gate("outage").open()  # the rollouts in flight go on meanwhile
            await sim.wait_for(lambda s: s.completed == 3 * N, timeout=60)
            await _pending_while_down(service)
            during = (await client.status())["store"]
            metrics = await _metrics(service)
            await asyncio.sleep(max(0.0, down_at + OUTAGE_S - loop.time()))  # the outage
            await asyncio.to_thread(private_db.start)
            results = [r async for r in batch]
        await service.supervisor.worker_slots.wait_until(
            lambda f: all(h.store_state.get("unavailable_s") is None for h in f.ready())
        )
        await _available_again(client)  # the supervisor's own writer reconnects too
        after = await client.submit(chat_spec("after"))  # admitted again
    assert refused.code == "store_unavailable" and refused.retry_after == 5.0
    assert during["available"] is False and during["unavailable_s"] is not None
    assert during["pending_commits"] > 0 and during["rejected"] >= 1
    assert "rolltap_serve_store_available 0.0" in metrics
    assert "rolltap_serve_rejected_store_total 1.0" in metrics
    assert sorted(r.task_id for r in results) == sorted(f"t{i}" for i in range(N))
    assert {(r.status, r.error) for r in results} == {("completed", None)}
    assert after.status == "completed"
    await assert_stored_once(private_db.url, batch.run_id, results)


@pytest.mark.timeout(300)
async def test_store_away_past_the_timeout_writes_unsaved_files_that_import_once(
    private_postgres: PrivateServer, start_service: ServiceFactory, sim: Simulator,
    tmp_path: Path,
) -> None:  # fmt: skip
    url, count = private_postgres.url, 20
    service = await _start_on(
        start_service, url, store_unavailable_timeout_s=3.0, unsaved_dir=str(tmp_path)
    )
    async with (
        ServeClient(service.url, TOKEN) as client,
        client.batch(held_specs(count, "away")) as batch,
    ):
        await sim.wait_for(lambda s: s.in_flight == count, timeout=60)
        await asyncio.to_thread(private_postgres.stop)
        sim.gate("away").open()
        results = [r async for r in batch]  # once each worker's writer gave up
    assert {r.error_code for r in results} == {"store_unavailable"}
    assert {r.status for r in results} == {"completed"}  # they ran: only the store failed
    files = sorted(await asyncio.to_thread(tmp_path.glob, f"rolltap-unsaved-{batch.run_id}-w*"))
    assert {r.unsaved_file for r in results} == {str(f) for f in files}
    assert all("rolltap sessions import" in (r.error or "") for r in results)
    lines = [orjson.loads(line) for f in files for line in f.read_bytes().splitlines()]
    assert sorted(doc["session"]["id"] for doc in lines) == sorted(r.id for r in results)
    await asyncio.to_thread(private_postgres.start)
    for path in files:
        assert "imported " in await arolltap_ok("sessions", "import", str(path), "--store", url)
        again = await arolltap_ok("sessions", "import", str(path), "--store", url)
        assert "imported 0 session" in again  # twice stores nothing twice
    await assert_stored_once(url, batch.run_id, results)
