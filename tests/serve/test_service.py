"""The service as a caller sees it: results, the store, 429, cancel, drain, auth."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import aiohttp
import pytest

from rolltap.errors import RolloutNotFoundError, ServiceDrainingError, ServiceFullError
from rolltap.serve import ServeClient
from rolltap.sim import Simulator
from rolltap.store import Store
from serve.servekit import TOKEN, ServiceFactory, chat_spec, gated_spec


async def test_batch_results_stream_back_and_are_stored(
    start_service: ServiceFactory, tmp_path: Path
) -> None:
    service = await start_service()
    async with ServeClient(service.url, TOKEN) as client:
        specs = [chat_spec(f"t{i}", rewards=["regex"], limits={"max_turns": 3}) for i in range(6)]
        results = [r async for r in client.submit_batch(specs, run_name="basic")]
        status = await client.status()
    assert sorted(r.task_id for r in results) == [f"t{i}" for i in range(6)]
    assert {r.status for r in results} == {"completed"}
    assert {r.worker for r in results} == {0, 1}  # least-loaded placement uses both
    assert status["results"] == {"completed": 6}
    assert [w["state"] for w in status["workers"]] == ["ready", "ready"]
    async with await Store.open(f"sqlite:///{tmp_path / 'serve.db'}") as store:
        run = await store.get_run(results[0].run_id)
        sessions = await store.list_sessions(run=run.id)
        assert (run.name, len(sessions)) == ("basic", 6)
        assert {s.id for s in sessions} == {r.id for r in results}
        assert {s.status for s in sessions} == {"completed"}
        kinds = [e.kind for e in await store.events(results[0].id)]
    assert kinds == ["model_request", "model_response", "reward", "status"]


async def test_token_guards_everything_but_health(start_service: ServiceFactory) -> None:
    service = await start_service(workers=1)
    await service.supervisor.worker_slots.wait_until(lambda fleet: bool(fleet.ready()[0].stats))
    async with aiohttp.ClientSession() as http:
        async with http.get(service.url + "/status") as resp:
            assert resp.status == 401
            assert (await resp.json())["error"]["code"] == "invalid_api_key"
        async with http.post(service.url + "/rollouts", json={"rollouts": []}) as resp:
            assert resp.status == 401
        async with http.get(service.url + "/health") as resp:
            assert await resp.json() == {"status": "ok", "ready_workers": 1}
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(service.url + "/metrics", headers=headers) as resp:
            text = await resp.text()
        bad = {"rollouts": [{"task": {"id": "x"}}]}
        async with http.post(service.url + "/rollouts", json=bad, headers=headers) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["code"] == "invalid_request"
    node = socket.gethostname()  # the worker's node: this machine
    assert f'rolltap_serve_worker_rss_bytes{{node="{node}",worker="0"}}' in text
    assert f'rolltap_serve_worker_peak_rss_bytes{{node="{node}",worker="0"}}' in text
    assert "rolltap_serve_capacity 8.0" in text


async def test_full_service_answers_429_and_admits_nothing(
    start_service: ServiceFactory, sim: Simulator
) -> None:
    service = await start_service(workers=1, max_inflight=2)
    async with ServeClient(service.url, TOKEN) as client:
        with pytest.raises(ServiceFullError):  # all or nothing: 3 never fit in 2
            await client.submit_batch([chat_spec(f"x{i}") for i in range(3)]).__anext__()
        specs = [gated_spec("a", "hold"), gated_spec("b", "hold")]
        async with client.batch(specs) as batch:
            with pytest.raises(ServiceFullError) as full:
                await client.submit(chat_spec("c"))
            assert (full.value.status, full.value.retry_after) == (429, 1.0)
            sim.gate("hold").open()
            held = [r.status async for r in batch]
        after = await client.submit(chat_spec("c"))
        status = await client.status()
    assert held == ["completed", "completed"]
    assert after.status == "completed"
    assert status["rejected_full"] == 2
    assert status["results"] == {"completed": 3}


async def test_cancel_one_rollout_then_the_batch(
    start_service: ServiceFactory, sim: Simulator, tmp_path: Path
) -> None:
    service = await start_service(workers=1)
    async with ServeClient(service.url, TOKEN) as client:
        specs = [gated_spec(f"t{i}", "never") for i in range(3)]
        async with client.batch(specs) as batch:
            await sim.wait_for(lambda stats: stats.in_flight == 3)
            await client.cancel(batch.rollouts[0])
            stream = aiter(batch)
            first = await anext(stream)
            assert (first.id, first.status) == (batch.rollouts[0], "cancelled")
            assert await client.cancel_batch(batch.id) == 2
            rest = [r async for r in stream]
        with pytest.raises(RolloutNotFoundError):
            await client.cancel(batch.rollouts[0])
        finished = await client.rollout(batch.rollouts[1])
    assert [r.status for r in rest] == ["cancelled", "cancelled"]
    assert finished["state"] == "finished"
    async with await Store.open(f"sqlite:///{tmp_path / 'serve.db'}") as store:
        sessions = await store.list_sessions(run=batch.run_id)
    assert sorted(s.status for s in sessions) == ["cancelled"] * 3
    assert sim.stats.disconnected == 3  # the held upstream calls were cancelled too


async def test_drain_lets_rollouts_finish_until_its_deadline(
    start_service: ServiceFactory, sim: Simulator
) -> None:
    service = await start_service(workers=1)
    async with ServeClient(service.url, TOKEN) as client:
        async with client.batch([gated_spec("slow", "never")]) as batch:
            await sim.wait_for(lambda stats: stats.in_flight == 1)
            async with asyncio.TaskGroup() as group:
                drained = group.create_task(service.drain(0.05))
                results = [r async for r in batch]
        assert drained.done()
        assert drained.result() is False  # the deadline had to cancel the rollout
        with pytest.raises(ServiceDrainingError):
            await client.submit(chat_spec("late"))
        health = await client.health()
    assert [r.status for r in results] == ["cancelled"]
    assert health["status"] == "draining"
