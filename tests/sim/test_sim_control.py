"""Gates, disconnects, stats, determinism and the auth digest."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam

from rolltap.sim import SimConfig, Simulator
from sim.simkit import chat_body, json_events, messages_body, read_events

SDK_USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say something."}]


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


async def _text(sim: Simulator, session: aiohttp.ClientSession, **body: Any) -> str:
    async with session.post(sim.base_url + "/chat/completions", json=chat_body(**body)) as resp:
        reply = await resp.json()
    content: str = reply["choices"][0]["message"]["content"]
    return content


async def test_same_seed_same_answer_other_seed_differs(session: aiohttp.ClientSession) -> None:
    async with Simulator(SimConfig(seed=5)) as a, Simulator(SimConfig(seed=5)) as b:
        first = await _text(a, session)
        assert first == await _text(b, session)
        assert first != await _text(a, session, messages=[{"role": "user", "content": "Other."}])
    async with Simulator(SimConfig(seed=6)) as c:
        assert first != await _text(c, session)


async def test_completion_tokens_config_and_pacing(session: aiohttp.ClientSession) -> None:
    fast = SimConfig(seed=1, completion_tokens=4)
    paced = SimConfig(seed=1, completion_tokens=4, ttft_ms=5, tokens_per_s=2000)
    async with Simulator(fast) as a, Simulator(paced) as b:
        text = await _text(a, session)
        assert len(text.split(" ")) == 4
        assert text == await _text(b, session)
        async with session.post(b.base_url + "/chat/completions", json=chat_body(stream=True)) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            events = json_events(await read_events(r))
        assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == text


async def test_gate_holds_non_stream_until_opened(
    sim: Simulator, client: openai.AsyncOpenAI
) -> None:
    gate = sim.gate("g")
    async with asyncio.TaskGroup() as tasks:
        replies = [
            tasks.create_task(
                client.chat.completions.create(
                    model="m", messages=SDK_USER, extra_headers={"x-sim-gate": "g"}
                )
            )
            for _ in range(3)
        ]
        await gate.wait_reached()
        stats = await sim.wait_for(lambda s: s.in_flight == 3 and gate.held == 3)
        assert stats.completed == 0
        assert not any(r.done() for r in replies)
        gate.open()
    assert all(r.result().choices[0].finish_reason == "stop" for r in replies)
    assert (sim.stats.completed, sim.stats.peak_in_flight, sim.stats.in_flight) == (3, 3, 0)
    assert gate.held == 0
    assert gate.is_open


async def test_gate_holds_stream_after_first_chunk(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    gate = sim.gate("mid")
    url = sim.base_url + "/chat/completions"
    body = chat_body(stream=True)
    async with session.post(url, json=body, headers={"x-sim-gate": "mid"}) as resp:
        first = await resp.content.readuntil(b"\n\n")
        await gate.wait_reached()
        assert gate.held == 1
        assert orjson.loads(first.removeprefix(b"data: "))["choices"][0]["delta"]["role"]
        gate.open()
        rest = await read_events(resp)
    assert rest[-1] == b"[DONE]"
    assert len(json_events(rest)) == 16
    await sim.wait_for(lambda s: s.completed == 1)


async def test_open_gate_lets_later_requests_through(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    sim.gate("done").open()
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=chat_body(), headers={"x-sim-gate": "done"}) as resp:
        assert resp.status == 200


@pytest.mark.parametrize("stream", [False, True])
async def test_disconnect_while_held_is_counted(sim: Simulator, stream: bool) -> None:
    gate = sim.gate("held")
    url = sim.base_url + "/chat/completions"

    async def call() -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.post(url, json=chat_body(stream=stream), headers={"x-sim-gate": "held"}) as resp,
        ):
            await resp.read()

    async with asyncio.TaskGroup() as tasks:
        request = tasks.create_task(call())
        await gate.wait_reached()
        request.cancel()  # closes the client's session and with it the connection
    stats = await sim.wait_for(lambda s: s.disconnected == 1 and s.in_flight == 0)
    assert stats.completed == 0
    assert gate.held == 0


async def test_wait_for_times_out(sim: Simulator) -> None:
    with pytest.raises(TimeoutError):
        await sim.wait_for(lambda s: s.requests > 0, timeout=0.05)


async def test_stats_record_the_last_request(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = chat_body(temperature=0.5)
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=body, headers={"X-Custom": "yes"}) as resp:
        await resp.read()
    stats = sim.stats
    assert stats.last_request_body == body
    assert stats.last_request_headers["x-custom"] == "yes"
    assert stats.requests == stats.completed == 1
    async with session.post(url, json=body) as resp:
        await resp.read()
    assert stats.connections == 1  # keep-alive reused the connection
    async with aiohttp.ClientSession() as other, other.post(url, json=body) as resp:
        await resp.read()
    assert stats.connections == 2


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Authorization": "Bearer secret"}, _digest("Bearer secret")),
        ({"x-api-key": "anthropic-key"}, _digest("anthropic-key")),
        ({"Authorization": "Bearer a", "x-api-key": "b"}, _digest("Bearer a")),
        ({}, "none"),
    ],
)
async def test_auth_digest_header(
    sim: Simulator, session: aiohttp.ClientSession, headers: dict[str, str], expected: str
) -> None:
    url = sim.base_url + "/chat/completions"
    async with session.post(url, json=chat_body(), headers=headers) as resp:
        assert resp.headers["x-sim-auth-digest"] == expected
        assert resp.headers["x-sim-request-id"]
    async with session.get(sim.url + "/health", headers=headers) as resp:
        assert resp.headers["x-sim-auth-digest"] == expected


async def test_sdk_auth_digest(sim: Simulator, client: openai.AsyncOpenAI) -> None:
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=SDK_USER)
    assert raw.headers["x-sim-auth-digest"] == _digest("Bearer k")
    reply = raw.parse()
    assert raw.headers["x-sim-request-id"] == "sim-" + reply.id.removeprefix("chatcmpl-sim-")


async def test_messages_auth_digest_from_api_key_or_bearer(
    sim: Simulator, claude: anthropic.AsyncAnthropic, session: aiohttp.ClientSession
) -> None:
    messages: list[MessageParam] = [{"role": "user", "content": "Say something."}]
    raw = await claude.messages.with_raw_response.create(model="m", max_tokens=9, messages=messages)
    sent = sim.stats.last_request_headers
    # SDK versions differ: some send x-api-key: k, others Authorization: Bearer k.
    value = sent.get("authorization") or sent["x-api-key"]
    assert value in ("k", "Bearer k")
    assert raw.headers["x-sim-auth-digest"] == _digest(value)
    assert (await raw.parse()).id == "msg_" + raw.headers["x-sim-request-id"].replace("-", "_")
    url = sim.url + "/v1/messages"
    for headers, expected in (
        ({"x-api-key": "k"}, "k"),
        ({"Authorization": "Bearer t"}, "Bearer t"),
    ):
        async with session.post(url, json=messages_body(), headers=headers) as resp:
            assert resp.status == 200
            assert resp.headers["x-sim-auth-digest"] == _digest(expected)


async def test_routes_and_request_errors(sim: Simulator, session: aiohttp.ClientSession) -> None:
    async with session.get(sim.url + "/health") as resp:
        assert (resp.status, await resp.json()) == (200, {"status": "ok"})
    async with session.get(sim.base_url + "/models") as resp:
        assert (await resp.json())["data"][0]["id"] == "sim-model"
    async with session.get(sim.url + "/nope") as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["type"] == "not_found_error"
    url = sim.base_url + "/chat/completions"
    async with session.post(url, data=b"{not json") as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == "malformed_json"
    assert sim.stats.last_request_body is None
    for bad in ([1, 2], {"model": "m"}, {"model": "m", "messages": "hi"}):
        async with session.post(url, json=bad) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["type"] == "invalid_request_error"


async def test_aclose_is_idempotent_and_cancels_held_requests() -> None:
    sim = Simulator()
    async with sim, aiohttp.ClientSession() as http:
        url = sim.base_url + "/chat/completions"
        gate = sim.gate("forever")

        async def call() -> None:
            with pytest.raises(aiohttp.ClientConnectionError):
                async with http.post(url, json=chat_body(), headers={"x-sim-gate": "forever"}):
                    pass

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(call())
            await gate.wait_reached()
            await sim.aclose()
    await sim.aclose()
    assert sim.stats.disconnected == 0  # shutting down is not a client disconnect
    assert sim.stats.in_flight == 0
