"""The engine's weights: the policy version each answer reports, and the pauses (vLLM's
``/pause`` modes, SGLang's ``/pause_generation``) with the requests they hold."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from rolltap.sim import SimConfig, Simulator
from rolltap.sim.completions_in import TokenPrompt, answer_tokens
from sim.simkit import chat_body, completions_body, messages_body, prompt_ids, responses_body
from sim.weightkit import control, events, ok, post, stream

IDS = prompt_ids()
SGL = {"input_ids": IDS}


def _full_ids(sim: Simulator) -> list[int]:
    """The uninterrupted answer's ids of ``IDS`` (the same on every token route)."""
    return list(answer_tokens(TokenPrompt(model=sim.config.model, ids=tuple(IDS)), sim.config).ids)


async def test_without_a_version_answers_carry_none(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    assert await ok(session, sim, "GET", "/get_weight_version") == {"weight_version": None}
    assert "weight_version" not in (await post(session, sim.url + "/generate", SGL))["meta_info"]
    assert "metadata" not in await post(session, sim.base_url + "/completions", completions_body())
    assert "metadata" not in await post(session, sim.base_url + "/chat/completions", chat_body())
    reply = await post(session, sim.base_url + "/responses", responses_body())
    assert reply["metadata"] == {}
    assert sim.snapshot()["weights"] == {"version": None, "paused": False}


async def test_every_route_reports_the_version(
    session: aiohttp.ClientSession,
) -> None:
    async with Simulator(SimConfig(seed=3, policy_version="v1")) as sim:
        await _assert_reports(sim, session, "v1")
        reply = await ok(session, sim, "POST", "/update_weight_version", {"new_version": "v2"})
        assert reply == {"success": True, "message": "Weight version updated to v2",
                         "new_version": "v2"}  # fmt: skip
        assert await ok(session, sim, "GET", "/get_weight_version") == {"weight_version": "v2"}
        await _assert_reports(sim, session, "v2")
        assert sim.stats.weight_updates == 1


async def _assert_reports(sim: Simulator, session: aiohttp.ClientSession, version: str) -> None:
    meta = (await post(session, sim.url + "/generate", SGL))["meta_info"]
    assert meta["weight_version"] == version
    chunks = await stream(session, sim.url + "/generate", {**SGL, "stream": True})
    assert {c["meta_info"]["weight_version"] for c in chunks[:-1]} == {version}
    metadata = {"weight_version": version}
    assert (await post(session, sim.base_url + "/completions", completions_body()))[
        "metadata"
    ] == metadata
    chunks = await stream(session, sim.base_url + "/completions", completions_body(stream=True))
    assert [c.get("metadata") for c in chunks[:-1]] == [None] * (len(chunks) - 2) + [metadata]
    async with openai.AsyncOpenAI(base_url=sim.base_url, api_key="k", max_retries=0) as sdk:
        completion = await sdk.chat.completions.create(model="m", messages=[
            {"role": "user", "content": "Say something."}])  # fmt: skip
        assert completion.model_dump()["metadata"] == metadata
        chat = [c.model_dump() async for c in await sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi."}], stream=True)]  # fmt: skip
        assert [c["choices"][0]["finish_reason"] for c in chat if c.get("metadata")] == ["stop"]
    reply = await post(session, sim.base_url + "/responses", responses_body(metadata={"k": "x"}))
    assert reply["metadata"] == {"k": "x", "weight_version": version}
    assert "metadata" not in await post(session, sim.base_url + "/messages", messages_body())


async def test_a_version_set_later_is_reported_by_the_same_request(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    assert "metadata" not in await post(session, sim.base_url + "/completions", completions_body())
    await ok(session, sim, "POST", "/update_weight_version", {"new_version": "step-7"})
    reply = await post(session, sim.base_url + "/completions", completions_body())
    assert reply["metadata"] == {"weight_version": "step-7"}
    assert sim.snapshot()["weights"]["version"] == "step-7"


async def test_vllm_pause_abort_ends_what_is_in_flight_and_holds_new_requests(
    session: aiohttp.ClientSession,
) -> None:
    async with Simulator(SimConfig(seed=2, tokens_per_s=10, completion_tokens=64)) as sim:
        body = chat_body(stream=True)
        async with session.post(sim.base_url + "/chat/completions", json=body) as resp:
            chunks = events(resp)
            await anext(chunks)  # the first token is out
            assert await ok(session, sim, "POST", "/pause?mode=abort") == {"status": "paused"}
            rest = [data async for _, data in chunks]
        assert rest[-1] == "[DONE]" and rest[-2]["choices"][0]["finish_reason"] == "abort"
        assert await ok(session, sim, "GET", "/is_paused") == {"is_paused": True}
        await _held_until_resumed(sim, session, "/resume", {"status": "resumed"})
        assert await ok(session, sim, "GET", "/is_paused") == {"is_paused": False}
        assert (sim.stats.aborted, sim.stats.pauses) == (1, 1)


async def _held_until_resumed(
    sim: Simulator, session: aiohttp.ClientSession, path: str, answer: dict[str, Any]
) -> None:
    """A request sent while paused waits (not refused) and is answered after the resume."""
    body, generating = completions_body(max_tokens=2), sim.stats.generating
    async with asyncio.TaskGroup() as tasks:
        held = tasks.create_task(post(session, sim.base_url + "/completions", body))
        await sim.wait_for(lambda s: s.held == 1)
        assert not held.done() and sim.stats.generating == generating
        assert await ok(session, sim, "POST", path) == answer
    assert held.result()["choices"][0]["finish_reason"] == "length"
    assert sim.stats.held == 0


async def test_vllm_pause_wait_returns_once_nothing_is_in_flight(
    session: aiohttp.ClientSession,
) -> None:
    async with Simulator(SimConfig(seed=2, tokens_per_s=50, completion_tokens=16)) as sim:
        async with asyncio.TaskGroup() as tasks:
            reply = tasks.create_task(post(session, sim.url + "/generate", SGL))
            await sim.wait_for(lambda s: s.generating == 1)
            assert await ok(session, sim, "POST", "/pause?mode=wait") == {"status": "paused"}
            # the generation was answered in full before the pause returned
            assert (sim.stats.completed, sim.stats.generating) == (1, 0)
        assert reply.result()["output_ids"] == _full_ids(sim)
        assert reply.result()["meta_info"]["finish_reason"]["type"] == "stop"
        await _held_until_resumed(sim, session, "/resume", {"status": "resumed"})
        assert sim.stats.aborted == 0


@pytest.mark.parametrize(
    ("pause", "body", "resume", "resumed"),
    [
        ("/pause?mode=keep", None, "/resume", {"status": "resumed"}),
        ("/pause_generation", {"mode": "in_place"}, "/continue_generation",
         {"message": "Generation continued successfully.", "status": "ok"}),
        ("/pause_generation", {"mode": "retract"}, "/continue_generation",
         {"message": "Generation continued successfully.", "status": "ok"}),
    ],
)  # fmt: skip
async def test_a_frozen_generation_goes_on_with_the_same_tokens(
    session: aiohttp.ClientSession, pause: str, body: Any, resume: str, resumed: Any
) -> None:
    config = SimConfig(seed=4, tokens_per_s=20, completion_tokens=12, policy_version="v1")
    async with Simulator(config) as sim:
        async with session.post(sim.url + "/generate", json={**SGL, "stream": True}) as resp:
            chunks = events(resp)
            seen = [(await anext(chunks))[1], (await anext(chunks))[1]]
            await ok(session, sim, "POST", pause, body)
            await sim.wait_for(lambda s: s.frozen == 1)
            # an update that does not abort: the frozen generation ends reporting it
            await ok(session, sim, "POST", "/update_weight_version", {"new_version": "v2"})
            assert sim.stats.generating == 1
            await _held_until_resumed(sim, session, resume, resumed)
            seen += [data async for _, data in chunks]
        assert seen[-1] == "[DONE]"
        last = seen[-2]
        assert last["output_ids"] == _full_ids(sim)
        assert last["meta_info"]["finish_reason"]["type"] == "stop"
        assert seen[0]["meta_info"]["weight_version"] == "v1"
        assert last["meta_info"]["weight_version"] == "v2"
        assert (sim.stats.aborted, sim.stats.frozen) == (0, 0)


async def test_sglang_pause_generation_aborts_by_default(
    session: aiohttp.ClientSession,
) -> None:
    async with Simulator(SimConfig(seed=4, tokens_per_s=10, completion_tokens=64)) as sim:
        async with asyncio.TaskGroup() as tasks:
            reply = tasks.create_task(post(session, sim.url + "/generate", SGL))
            await sim.wait_for(lambda s: s.generating == 1)
            answer = await ok(session, sim, "POST", "/pause_generation")
            assert answer == {"message": "Generation paused successfully.", "status": "ok"}
        meta = reply.result()["meta_info"]
        aborted = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
        assert meta["finish_reason"] == aborted
        assert await ok(session, sim, "GET", "/is_paused") == {"is_paused": True}
        resumed = {"message": "Generation continued successfully.", "status": "ok"}
        await _held_until_resumed(sim, session, "/continue_generation", resumed)


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/pause?mode=later", None, 400),
        ("POST", "/pause_generation", {"mode": "keep"}, 400),
        ("POST", "/pause_generation", ["abort"], 400),
        ("POST", "/update_weight_version", {"abort_all_requests": True}, 400),
        ("POST", "/update_weight_version", {"new_version": 3}, 400),
        ("POST", "/update_weight_version", {"new_version": "v", "abort_all_requests": "yes"}, 400),
        ("POST", "/update_weight_version", None, 400),
        ("GET", "/pause", None, 405),
        ("POST", "/get_weight_version", None, 405),
    ],
)
async def test_bad_requests_are_refused_and_change_nothing(
    sim: Simulator, session: aiohttp.ClientSession, method: str, path: str, body: Any, status: int
) -> None:
    got, answer = await control(session, sim, method, path, body)
    assert got == status
    assert set(answer["error"]) == {"message", "type", "code"}
    assert await ok(session, sim, "GET", "/is_paused") == {"is_paused": False}
    assert await ok(session, sim, "GET", "/get_weight_version") == {"weight_version": None}
    assert (sim.stats.pauses, sim.stats.weight_updates, sim.stats.requests) == (0, 0, 0)


async def test_malformed_control_json_is_a_400(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    for path in ("/update_weight_version", "/pause_generation"):
        async with session.post(sim.url + path, data=b"{not json") as resp:
            assert resp.status == 400
            assert "malformed JSON" in (await resp.json())["error"]["message"]
    assert not sim.weights.paused
