"""Injected faults, seen from a raw aiohttp client."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from rolltap.sim import SimConfig, Simulator
from sim.simkit import chat_body, json_events, read_events


def _fault(spec: str) -> dict[str, str]:
    return {"x-sim-fault": spec}


@pytest.mark.parametrize(
    ("status", "kind", "retry_after"),
    [
        (400, "invalid_request_error", None),
        (401, "authentication_error", None),
        (429, "rate_limit_error", "1"),
        (500, "server_error", None),
        (503, "server_error", "1"),
    ],
)
async def test_status_fault(
    sim: Simulator,
    session: aiohttp.ClientSession,
    status: int,
    kind: str,
    retry_after: str | None,
) -> None:
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=chat_body(), headers=_fault(f"status={status}")) as resp:
        assert resp.status == status
        assert resp.headers.get("Retry-After") == retry_after
        body = await resp.json()
    error = body["error"]
    assert set(error) == {"message", "type", "code"}
    assert error["type"] == kind
    assert str(status) in error["message"]
    assert sim.stats.faults == {"status": 1}
    assert sim.stats.completed == 1


async def test_stall_is_caught_by_a_short_client_timeout(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    timeout = aiohttp.ClientTimeout(total=0.2)
    with pytest.raises(TimeoutError):
        async with session.post(url, json=chat_body(), headers=_fault("stall=60"), timeout=timeout):
            pass
    # The client gave up and closed its connection: the stalled handler notices.
    stats = await sim.wait_for(lambda s: s.disconnected == 1)
    assert (stats.faults, stats.completed, stats.in_flight) == ({"stall": 1}, 0, 0)


async def test_stall_mid_stream_after_the_first_chunk(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    timeout = aiohttp.ClientTimeout(sock_read=0.2)
    body = chat_body(stream=True)
    async with session.post(
        url, json=body, headers=_fault("stall-mid=60"), timeout=timeout
    ) as resp:
        first = await resp.content.readuntil(b"\n\n")
        assert (
            orjson.loads(first.removeprefix(b"data: "))["choices"][0]["delta"]["role"]
            == "assistant"
        )
        with pytest.raises(TimeoutError):
            await resp.content.readuntil(b"\n\n")
    await sim.wait_for(lambda s: s.disconnected == 1)


@pytest.mark.parametrize("chunks", [0, 1, 3])
async def test_drop_mid_stream(sim: Simulator, session: aiohttp.ClientSession, chunks: int) -> None:
    url = sim.base_url + "/chat/completions"
    events: list[bytes] = []
    body = chat_body(stream=True)
    async with session.post(url, json=body, headers=_fault(f"drop={chunks}")) as resp:
        assert resp.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await read_events(resp, into=events)
    assert len(events) == chunks
    assert all(orjson.loads(e)["object"] == "chat.completion.chunk" for e in events)
    stats = await sim.wait_for(lambda s: s.in_flight == 0)
    assert (stats.faults, stats.completed, stats.disconnected) == ({"drop": 1}, 0, 0)


async def test_drop_non_stream_closes_without_a_body(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=chat_body(), headers=_fault("drop=2")) as resp:
        assert resp.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()
    stats = await sim.wait_for(lambda s: s.in_flight == 0)
    assert (stats.faults, stats.completed, stats.disconnected) == ({"drop": 1}, 0, 0)


async def test_malformed_non_stream(sim: Simulator, session: aiohttp.ClientSession) -> None:
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=chat_body(), headers=_fault("malformed")) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        raw = await resp.read()
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)
    assert sim.stats.faults == {"malformed": 1}


async def test_malformed_stream_event_after_the_first_chunk(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    body = chat_body(stream=True)
    async with session.post(url, json=body, headers=_fault("malformed")) as resp:
        events = await read_events(resp)
    assert len(events) == 2
    assert orjson.loads(events[0])["choices"][0]["delta"]["role"] == "assistant"
    assert events[1] == b"{not json"


async def test_reset_closes_before_any_response(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    with pytest.raises(aiohttp.ClientConnectionError):
        async with session.post(url, json=chat_body(), headers=_fault("reset")):
            pass
    stats = await sim.wait_for(lambda s: s.in_flight == 0)
    assert (stats.faults, stats.completed, stats.disconnected) == ({"reset": 1}, 0, 0)


async def test_header_fault_overrides_config_faults(session: aiohttp.ClientSession) -> None:
    async with Simulator(SimConfig(faults=("status=500",))) as sim:
        url = sim.base_url + "/chat/completions"
        async with session.post(url, json=chat_body()) as resp:
            assert resp.status == 500
        async with session.post(url, json=chat_body(), headers=_fault("status=429")) as resp:
            assert resp.status == 429
        assert sim.stats.faults == {"status": 2}


async def test_bad_header_fault_is_a_400(sim: Simulator, session: aiohttp.ClientSession) -> None:
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=chat_body(), headers=_fault("explode")) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert "unknown kind 'explode'" in error["message"]
    assert error["code"] == "invalid_fault"


async def _statuses(seed: int, session: aiohttp.ClientSession, n: int = 24) -> list[int]:
    config = SimConfig(seed=seed, faults=("status=500@0.5", "status=429@0.5"))
    async with Simulator(config) as sim:
        url = sim.base_url + "/chat/completions"
        out = []
        for _ in range(n):
            async with session.post(url, json=chat_body()) as resp:
                await resp.read()
                out.append(resp.status)
        return out


async def test_fault_probability_is_deterministic_per_seed(
    session: aiohttp.ClientSession,
) -> None:
    first = await _statuses(1, session)
    assert first == await _statuses(1, session)
    assert {200, 429, 500} <= set(first)
    assert first != await _statuses(2, session)


async def test_streamed_faults_do_not_leak_into_later_requests(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.base_url + "/chat/completions"
    with pytest.raises(aiohttp.ClientPayloadError):
        async with session.post(url, json=chat_body(stream=True), headers=_fault("drop=1")) as resp:
            await read_events(resp)
    async with session.post(url, json=chat_body(stream=True)) as resp:
        events = await read_events(resp)
    assert events[-1] == b"[DONE]"
    assert len(json_events(events)) == 17
