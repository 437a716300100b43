"""A trainer's policy through ``rolltap serve``: versions, pauses and resumes reach every
worker's gateway before the service answers; a worker that starts later takes them."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ForwardPauseError, InvalidRequestError, ServiceFullError
from rolltap.events import Event
from rolltap.serve import ServeClient
from rolltap.serve.supervisor.worker_slots import WorkerSlots
from rolltap.sim import Simulator
from rolltap.store import Store
from serve.servekit import TOKEN, ServiceFactory, chat_spec, gated_spec

ENDPOINT = "default"


def _gates(slots: WorkerSlots, field: str) -> list[Any]:
    """``field`` of the default endpoint's gate on each ready worker (latest report)."""
    return [h.policy.get(ENDPOINT, {}).get(field) for h in slots.ready()]


def _all_report(field: str, value: Any, workers: int = 2) -> Callable[[WorkerSlots], bool]:
    def check(slots: WorkerSlots) -> bool:
        seen = _gates(slots, field)
        return len(seen) == workers and all(v == value for v in seen)

    return check


def _held(count: int) -> Callable[[WorkerSlots], bool]:
    return lambda slots: sum(v or 0 for v in _gates(slots, "held")) == count


async def _responses(store_url: str, session_ids: list[str]) -> list[Event]:
    async with await Store.open(store_url) as store:
        return [
            event
            for sid in session_ids
            for event in await store.events(sid)
            if event.kind == "model_response"
        ]


async def test_a_version_reaches_every_worker_before_the_answer(
    start_service: ServiceFactory, tmp_path: Path
) -> None:
    service = await start_service()
    async with ServeClient(service.url, TOKEN) as client:
        answer = await client.set_policy_version("v1")
        results = [r async for r in client.submit_batch([chat_spec(f"t{i}") for i in range(4)])]
        seen = await client.policy()
    # answered only once both workers' gateways had it (their replies, not heartbeats)
    assert answer["endpoints"][ENDPOINT]["version"] == "v1"
    assert answer["endpoints"][ENDPOINT]["epoch"] == 1
    assert sorted(w["index"] for w in answer["workers"]) == [0, 1]
    assert {w["endpoints"][ENDPOINT]["version"] for w in answer["workers"]} == {"v1"}
    assert {r.worker for r in results} == {0, 1}
    assert {(r.status, tuple(r.policy_versions)) for r in results} == {("completed", ("v1",))}
    assert seen["endpoints"][ENDPOINT]["version"] == "v1"
    responses = await _responses(f"sqlite:///{tmp_path / 'serve.db'}", [r.id for r in results])
    assert len(responses) == 4
    assert {e.payload["policy_version"] for e in responses} == {"v1"}


async def test_hold_keeps_new_calls_until_resume_without_an_error(
    start_service: ServiceFactory, sim: Simulator, tmp_path: Path
) -> None:
    service = await start_service()
    slots = service.supervisor.worker_slots
    async with ServeClient(service.url, TOKEN) as client:
        paused = await client.pause("hold")
        assert paused["endpoints"][ENDPOINT]["paused"] == "hold"
        async with client.batch([chat_spec(f"t{i}") for i in range(4)]) as batch:
            await slots.wait_until(_held(4))  # each worker's heartbeat counts its held calls
            assert sim.stats.requests == 0  # none went upstream while paused
            resumed_at = time.time()
            resumed = await client.resume()
            results = [r async for r in batch]
    assert resumed["endpoints"][ENDPOINT]["paused"] is None
    assert [r.status for r in results] == ["completed"] * 4  # 0 harness errors
    assert sim.stats.requests == 4  # no call lost, none sent twice
    responses = await _responses(f"sqlite:///{tmp_path / 'serve.db'}", [r.id for r in results])
    assert len(responses) == 4
    assert all(event.ts > resumed_at for event in responses)  # answered after the resume


async def test_drain_answers_only_when_no_worker_has_a_call_in_flight(
    start_service: ServiceFactory, sim: Simulator
) -> None:
    service = await start_service()
    slots = service.supervisor.worker_slots
    async with ServeClient(service.url, TOKEN) as client:
        specs = [gated_spec("a", "slow"), gated_spec("b", "slow")]
        async with client.batch(specs) as batch, asyncio.TaskGroup() as group:
            await sim.wait_for(lambda stats: stats.in_flight == 2)
            drain = group.create_task(client.pause("drain"))
            await slots.wait_until(_all_report("paused", "drain"))  # both gates are paused
            assert _gates(slots, "in_flight") == [1, 1]  # one call in flight on each
            assert not drain.done()
            sim.gate("slow").open()
            results = [r async for r in batch]
            drained = await drain
        await client.resume()
    assert {r.worker for r in results} == {0, 1}
    assert [r.status for r in results] == ["completed", "completed"]
    assert drained["endpoints"][ENDPOINT]["in_flight"] == 0
    assert {w["endpoints"][ENDPOINT]["in_flight"] for w in drained["workers"]} == {0}


def _replaced(index: int, old_pid: int | None) -> Callable[[WorkerSlots], bool]:
    def check(slots: WorkerSlots) -> bool:
        handle = slots.slots[index]
        return handle is not None and handle.state == "ready" and handle.pid != old_pid

    return check


async def test_a_worker_started_later_takes_the_version_and_the_pause(
    start_service: ServiceFactory, sim: Simulator, tmp_path: Path
) -> None:
    service = await start_service()
    slots = service.supervisor.worker_slots
    async with ServeClient(service.url, TOKEN) as client:
        await client.set_policy_version("v1")
        await client.set_policy_version("v7")
        await client.pause("hold")
        victim = slots.slots[0]
        assert victim is not None and victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        await slots.wait_until(_replaced(0, victim.pid))
        await slots.wait_until(_all_report("paused", "hold"))  # the new one holds calls too
        assert _gates(slots, "version") == ["v7", "v7"]
        async with client.batch([chat_spec(f"t{i}") for i in range(4)]) as batch:
            await slots.wait_until(_held(4))
            assert sim.stats.requests == 0
            await client.resume()
            results = [r async for r in batch]
    assert {r.worker for r in results} == {0, 1}
    assert {(r.status, tuple(r.policy_versions)) for r in results} == {("completed", ("v7",))}
    responses = await _responses(f"sqlite:///{tmp_path / 'serve.db'}", [r.id for r in results])
    assert {e.payload["policy_version"] for e in responses} == {"v7"}


@pytest.fixture
async def engine() -> AsyncIterator[tuple[str, list[str], dict[str, int]]]:
    """A stand-in engine: counts ``POST /pause?…`` and ``/resume``; ``fail["status"]``
    makes it answer that status."""
    seen: list[str] = []
    fail: dict[str, int] = {}

    async def control(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        return web.json_response({}, status=fail.get("status", 200))

    app = web.Application()
    app.router.add_post("/pause", control)
    app.router.add_post("/resume", control)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/v1", seen, fail
    await runner.cleanup()


async def test_a_forwarded_pause_reaches_the_engine_once_and_its_error_the_caller(
    start_service: ServiceFactory, sim: Simulator, engine: tuple[str, list[str], dict[str, int]]
) -> None:
    url, seen, fail = engine
    endpoints = [
        EndpointConfig(name="policy", base_url=sim.base_url, model="sim-model"),
        EndpointConfig(name="engine", base_url=url, model="m", forward_pause="vllm"),
    ]
    service = await start_service(endpoints=endpoints)
    async with ServeClient(service.url, TOKEN) as client:
        paused = await client.pause("hold", endpoint="engine")
        assert seen == ["/pause?mode=keep"]  # two workers, one told the engine
        assert {w["endpoints"]["engine"]["paused"] for w in paused["workers"]} == {"hold"}
        assert paused["endpoints"]["policy"]["paused"] is None
        await client.resume(endpoint="engine")
        assert seen == ["/pause?mode=keep", "/resume"]
        fail["status"] = 500
        with pytest.raises(ForwardPauseError) as refused:
            await client.pause("drain", endpoint="engine")
        undone = await client.policy()
        with pytest.raises(InvalidRequestError):
            await client.pause("hold", endpoint="nope")
    assert (refused.value.code, refused.value.status) == ("forward_pause_failed", 502)
    assert "HTTP 500" in refused.value.message
    # the pause the engine refused is undone on every worker, not left half made
    assert undone["endpoints"]["engine"]["paused"] is None
    assert {w["endpoints"]["engine"]["paused"] for w in undone["workers"]} == {None}


async def test_an_unreachable_engine_is_the_callers_error(start_service: ServiceFactory) -> None:
    dead = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", forward_pause="sglang")
    service = await start_service(endpoints=[dead])
    async with ServeClient(service.url, TOKEN) as client:
        with pytest.raises(ForwardPauseError) as unreachable:
            await client.pause("abort")
        state = await client.policy()
    assert "did not take POST /pause_generation" in unreachable.value.message
    assert state["endpoints"][ENDPOINT]["paused"] is None


async def test_batches_ahead_of_the_trainer_are_refused_until_a_new_version(
    start_service: ServiceFactory,
) -> None:
    """``max_staleness = 1``, ``rollouts_per_version = 2``, counted by the service over
    both workers (their gateways count nothing): two rollouts a version; a batch beyond
    that gets the retryable ``429 service_full`` naming the bound, and is taken once the
    trainer publishes the next version."""
    gateway = GatewaySettings(max_staleness=1, rollouts_per_version=2)
    service = await start_service(gateway=gateway)
    async with ServeClient(service.url, TOKEN) as client:
        await client.set_policy_version("v0")
        first = [r async for r in client.submit_batch([chat_spec("a"), chat_spec("b")])]
        assert {r.status for r in first} == {"completed"}
        with pytest.raises(ServiceFullError, match="rollouts_per_version = 2") as info:
            await client.submit(chat_spec("c"))
        assert info.value.retry_after == 1.0
        policy = (await client.policy())["endpoints"][ENDPOINT]
        assert (policy["began"], policy["rollouts_per_version"]) == (2, 2)
        await client.set_policy_version("v1")
        slots = service.supervisor.worker_slots  # each worker's gate, as it reported it
        assert _gates(slots, "epoch") == [2, 2]
        assert _gates(slots, "began") == _gates(slots, "rollouts_per_version") == [None, None]
        late = await client.submit(chat_spec("c"))
        assert (late.status, late.policy_versions) == ("completed", ["v1"])
        assert (await client.policy())["endpoints"][ENDPOINT]["began"] == 3
