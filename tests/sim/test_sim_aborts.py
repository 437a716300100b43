"""Aborted generations answer what they generated so far, on every route, in each engine's
shape: a prefix of the uninterrupted answer (same seed), so a client can continue it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anthropic
import pytest

from rolltap.sim import SimConfig, Simulator
from rolltap.sim.completions_in import TokenPrompt, answer_tokens
from sim.simkit import chat_body, messages_body, prompt_ids, responses_body
from sim.weightkit import events, ok, post

IDS = prompt_ids()
# Paced: 64 tokens take 6.4 s, and an abort comes after the first few.
PACED = SimConfig(seed=9, tokens_per_s=10, completion_tokens=64, policy_version="v1")
UPDATE = {"new_version": "v2", "abort_all_requests": True}


@pytest.fixture
async def sim() -> AsyncIterator[Simulator]:
    async with Simulator(PACED) as running:
        yield running


@pytest.fixture
async def whole() -> AsyncIterator[Simulator]:
    """The same simulator unpaced: the uninterrupted answers."""
    async with Simulator(PACED.model_copy(update={"tokens_per_s": 0.0})) as running:
        yield running


def _full(sim: Simulator) -> tuple[list[int], list[float]]:
    answer = answer_tokens(TokenPrompt(model=sim.config.model, ids=tuple(IDS)), sim.config)
    return list(answer.ids), list(answer.logprobs)


async def _abort_midway(
    sim: Simulator, session: aiohttp.ClientSession, url: str, body: dict[str, Any], how: str
) -> tuple[Any, int]:
    """A non-stream request aborted (``how``: the control route) once 3 tokens are out: its
    answer, and how many tokens it had generated."""
    tokens, aborted = sim.stats.tokens_generated, sim.stats.aborted
    async with asyncio.TaskGroup() as tasks:
        reply = tasks.create_task(post(session, url, body))
        await sim.wait_for(lambda s: s.tokens_generated >= tokens + 3)
        control = UPDATE if how == "/update_weight_version" else None
        await ok(session, sim, "POST", how, control)
    assert sim.stats.aborted == aborted + 1
    return reply.result(), sim.stats.tokens_generated - tokens


async def test_sglang_update_with_abort_answers_the_ids_so_far(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"input_ids": IDS, "return_logprob": True}
    url = sim.url + "/generate"
    reply, n = await _abort_midway(sim, session, url, body, "/update_weight_version")
    ids, logprobs = _full(sim)
    assert 3 <= n < len(ids) and reply["output_ids"] == ids[:n]
    meta = reply["meta_info"]
    assert [e[0] for e in meta["output_token_logprobs"]] == logprobs[:n]
    assert meta["finish_reason"]["type"] == "abort" and meta["completion_tokens"] == n
    # the tokens are the old version's; the next answer is the new one's
    assert meta["weight_version"] == "v1"
    assert (await post(session, sim.url + "/generate", {"input_ids": IDS, "sampling_params": {
        "max_new_tokens": 1}}))["meta_info"]["weight_version"] == "v2"  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body", "check"),
    [
        ("/v1/completions", {"model": "m", "prompt": IDS, "return_token_ids": True, "logprobs": 0},
         lambda r: (r["choices"][0]["token_ids"], r["choices"][0]["finish_reason"])),
        ("/inference/v1/generate", {"token_ids": IDS},
         lambda r: (r["choices"][0]["token_ids"], r["choices"][0]["finish_reason"])),
        ("/completion", {"prompt": IDS, "return_tokens": True},
         lambda r: (r["tokens"], r["stop_type"])),
    ],
)  # fmt: skip
async def test_token_routes_answer_the_ids_so_far(
    sim: Simulator, session: aiohttp.ClientSession, path: str, body: Any, check: Callable[..., Any]
) -> None:
    reply, n = await _abort_midway(sim, session, sim.url + path, body, "/pause?mode=abort")
    got, reason = check(reply)
    ids = _full(sim)[0]
    assert 3 <= n < len(ids) and got == ids[:n]
    assert reason == ("none" if path == "/completion" else "abort")


async def test_conversation_routes_answer_the_text_so_far(
    sim: Simulator, whole: Simulator, session: aiohttp.ClientSession
) -> None:
    body = chat_body(return_token_ids=True)
    url = sim.base_url + "/chat/completions"
    chat, n = await _abort_midway(sim, session, url, body, "/pause_generation")
    full = await post(session, whole.base_url + "/chat/completions", body)
    (choice,), (want,) = chat["choices"], full["choices"]
    assert choice["finish_reason"] == "abort" and chat["metadata"] == {"weight_version": "v1"}
    text = choice["message"]["content"]
    assert len(text.split(" ")) == n and chat["usage"]["completion_tokens"] == n
    assert len(text) < len(want["message"]["content"])
    assert want["message"]["content"].startswith(text)
    assert choice["token_ids"] == want["token_ids"][:n]
    await ok(session, sim, "POST", "/continue_generation")

    claude, n = await _abort_midway(sim, session, sim.base_url + "/messages", messages_body(),
                                    "/pause?mode=abort")  # fmt: skip
    assert claude["stop_reason"] == "pause_turn" and claude["usage"]["output_tokens"] == n
    assert full["choices"][0]["message"]["content"].startswith(claude["content"][0]["text"])
    await ok(session, sim, "POST", "/resume")

    response, n = await _abort_midway(sim, session, sim.base_url + "/responses",
                                      responses_body(), "/pause?mode=abort")  # fmt: skip
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "abort"}
    (item,) = response["output"]
    assert item["status"] == "incomplete" and response["usage"]["output_tokens"] == n
    assert full["choices"][0]["message"]["content"].startswith(item["content"][0]["text"])


async def _stream_aborted(
    sim: Simulator, session: aiohttp.ClientSession, url: str, body: dict[str, Any], after: int
) -> list[tuple[str, Any]]:
    """Every event of a stream aborted (``/pause?mode=abort``) after ``after`` events."""
    async with session.post(url, json={**body, "stream": True}) as resp:
        assert resp.status == 200
        stream = events(resp)
        seen = [await anext(stream) for _ in range(after)]
        await ok(session, sim, "POST", "/pause?mode=abort")
        seen += [event async for event in stream]
    assert sim.stats.aborted == 1
    return seen


@pytest.mark.parametrize(
    ("path", "body", "ids_of"),
    [
        ("/generate", {"input_ids": IDS}, lambda chunks: chunks[-1]["output_ids"]),
        ("/inference/v1/generate", {"token_ids": IDS},
         lambda chunks: [i for c in chunks for i in c["choices"][0]["token_ids"]]),
        ("/v1/completions", {"model": "m", "prompt": IDS, "return_token_ids": True},
         lambda chunks: [i for c in chunks for i in c["choices"][0]["token_ids"]]),
        ("/completion", {"prompt": IDS, "return_tokens": True},
         lambda chunks: [i for c in chunks for i in c["tokens"]]),
    ],
)  # fmt: skip
async def test_token_streams_end_with_the_ids_they_sent(
    sim: Simulator, session: aiohttp.ClientSession, path: str, body: Any,
    ids_of: Callable[[list[Any]], list[int]],
) -> None:  # fmt: skip
    seen = [data for _, data in await _stream_aborted(sim, session, sim.url + path, body, 3)]
    chunks = [data for data in seen if data != "[DONE]"]
    ids = ids_of(chunks)
    assert 3 <= len(ids) < len(_full(sim)[0]) and ids == _full(sim)[0][: len(ids)]
    last = chunks[-1]
    if path == "/completion":  # llama.cpp: a final event without ids, stop_type none
        assert (last["stop"], last["stop_type"]) == (True, "none")
        assert last["tokens_predicted"] == len(ids)
        return
    assert seen[-1] == "[DONE]"
    if path == "/generate":  # the abort holds the ids of the last chunk before it
        assert last["meta_info"]["finish_reason"]["type"] == "abort"
        assert last["output_ids"] == chunks[-2]["output_ids"]
    else:
        assert last["choices"][0]["finish_reason"] == "abort"
        assert last["choices"][0]["token_ids"] == []


async def test_chat_stream_ends_with_abort(
    sim: Simulator, whole: Simulator, session: aiohttp.ClientSession
) -> None:
    options = {"stream_options": {"include_usage": True}}
    seen = await _stream_aborted(sim, session, sim.base_url + "/chat/completions",
                                 chat_body(**options), 3)  # fmt: skip
    full = await post(session, whole.base_url + "/chat/completions", chat_body())
    chunks = [data for _, data in seen[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert full["choices"][0]["message"]["content"].startswith(text) and text
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finish] == ["abort"]
    assert finish[0]["metadata"] == {"weight_version": "v1"}
    assert chunks[-1]["usage"]["completion_tokens"] == len(chunks) - 2
    assert seen[-1][1] == "[DONE]"


async def test_messages_stream_ends_with_pause_turn(
    sim: Simulator, whole: Simulator, session: aiohttp.ClientSession
) -> None:
    claude = anthropic.AsyncAnthropic(base_url=sim.url, api_key="k", max_retries=0)
    user: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Say something."}]
    async with claude, claude.messages.stream(model="m", max_tokens=100, messages=user) as stream:
        texts = 0
        async for event in stream:
            texts += event.type == "text"
            if event.type == "text" and texts == 3:  # the third token is out: abort
                await ok(session, sim, "POST", "/pause?mode=abort")
        message = await stream.get_final_message()
    full = (await post(session, whole.base_url + "/messages", messages_body()))["content"][0]
    assert message.stop_reason == "pause_turn"
    (block,) = message.content
    assert block.type == "text" and len(block.text.split()) >= 3
    assert full["text"].startswith(block.text) and block.text != full["text"]


async def test_responses_stream_ends_incomplete(
    sim: Simulator, whole: Simulator, session: aiohttp.ClientSession
) -> None:
    seen = await _stream_aborted(sim, session, sim.base_url + "/responses", responses_body(), 6)
    full = await post(session, whole.base_url + "/responses", responses_body())
    names = [name for name, _ in seen]
    assert names[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.incomplete"]  # fmt: skip
    assert [data["sequence_number"] for _, data in seen] == list(range(len(seen)))
    text = "".join(data["delta"] for name, data in seen if name == "response.output_text.delta")
    final = seen[-1][1]["response"]
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "abort"}
    assert final["output"][0]["content"][0]["text"] == text == seen[-4][1]["text"]
    assert full["output"][0]["content"][0]["text"].startswith(text) and text
    assert final["metadata"] == {"weight_version": "v1"}


async def test_an_abort_before_the_first_token_answers_an_empty_start(
    session: aiohttp.ClientSession,
) -> None:
    async with Simulator(SimConfig(seed=1, ttft_ms=60_000)) as sim, asyncio.TaskGroup() as tasks:
        reply = tasks.create_task(post(session, sim.base_url + "/messages", messages_body()))
        streamed = tasks.create_task(
            _stream_all(session, sim.base_url + "/messages", messages_body(stream=True))
        )
        await sim.wait_for(lambda s: s.generating == 2)
        await ok(session, sim, "POST", "/pause?mode=abort")
    assert (reply.result()["content"], reply.result()["stop_reason"]) == ([], "pause_turn")
    names = [name for name, _ in streamed.result()]
    assert names == ["message_start", "content_block_start", "ping", "content_block_stop",
                     "message_delta", "message_stop"]  # fmt: skip
    assert streamed.result()[-2][1]["delta"]["stop_reason"] == "pause_turn"


async def _stream_all(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> list[tuple[str, Any]]:
    async with session.post(url, json=body) as resp:
        return [event async for event in events(resp)]


async def test_a_request_held_at_a_gate_is_aborted_too(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    gate = sim.gate("g")
    headers = {"x-sim-gate": "g"}
    async with asyncio.TaskGroup() as tasks:
        reply = tasks.create_task(session.post(sim.base_url + "/chat/completions",
                                               json=chat_body(), headers=headers))  # fmt: skip
        await gate.wait_reached()
        await ok(session, sim, "POST", "/update_weight_version", UPDATE)
    async with reply.result() as resp:
        answer = await resp.json()
    assert answer["choices"][0]["finish_reason"] == "abort"
    assert answer["choices"][0]["message"]["content"] == ""
    assert gate.held == 0 and not gate.is_open
