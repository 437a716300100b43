"""Server-side token capture on a chat relay (``capture_tokens``): the official SDKs as the
harness, the gateway, the simulator answering ``return_token_ids`` as vLLM does.

Each answer is compared with the same call through a gateway without capture: the harness
must get exactly that, while the events hold the server's ids."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import pytest

from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.exports.tokens import assemble, token_turn
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator
from rolltap.sim.vocab import VOCAB

MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]
#: the simulator's prompt for MESSAGES, as its chat route renders and tokenizes it
PROMPT_IDS = VOCAB.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
TOOLS: list[Any] = [{
    "type": "function",
    "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}},
}]  # fmt: skip


@pytest.fixture
async def gateways(sim: Simulator) -> AsyncIterator[dict[str, Gateway]]:
    """``plain`` (no capture), ``ids`` (capture_tokens) and ``logprobs`` (and
    capture_logprobs), all in front of one simulator."""
    kinds = {"plain": {}, "ids": {"capture_tokens": True},
             "logprobs": {"capture_tokens": True, "capture_logprobs": True}}  # fmt: skip
    out: dict[str, Gateway] = {}
    try:
        for name, fields in kinds.items():
            endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", **fields)
            out[name] = Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN))
            await out[name].start()
        yield out
    finally:
        for gateway in out.values():
            await gateway.aclose()


def _same(answer: Any) -> Any:
    """An answer without what differs per request (ids, the time)."""
    if isinstance(answer, list):
        return [_same(item) for item in answer]
    if isinstance(answer, dict):
        return {k: _same(v) for k, v in answer.items() if k not in ("id", "created")}
    return answer


async def _chat(
    http: aiohttp.ClientSession, gateway: Gateway, *, stream: bool, **params: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One call through ``gateway`` with the OpenAI SDK: what the harness got (the body, or
    each chunk, as the SDK parsed it, extra fields included), and the rollout's events."""
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        if stream:
            chunks = await client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, **params
            )
            got = [_same(chunk.model_dump()) async for chunk in chunks]
        else:
            raw = await client.chat.completions.with_raw_response.create(
                model="m", messages=MESSAGES, **params
            )
            assert b"token_ids" not in raw.content
            got = [_same(raw.parse().model_dump())]
    return got, await events(http, gateway, rollout["id"])


def _payloads(evs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    request, response = (e["payload"] for e in evs)
    return request, response


def _text(got: list[dict[str, Any]]) -> str:
    if "message" in got[0]["choices"][0]:
        return str(got[0]["choices"][0]["message"]["content"])
    return "".join(c["choices"][0]["delta"]["content"] or "" for c in got if c["choices"])


@pytest.mark.parametrize("stream", [False, True])
async def test_the_server_ids_are_recorded_and_the_harness_gets_its_own_answer(
    stream: bool, gateways: dict[str, Gateway], sim: Simulator, http: aiohttp.ClientSession
) -> None:
    plain, plain_evs = await _chat(http, gateways["plain"], stream=stream)
    got, evs = await _chat(http, gateways["ids"], stream=stream)
    assert sim.stats.last_request_body is not None
    assert sim.stats.last_request_body["return_token_ids"] is True
    assert got == plain  # nothing added, nothing lost, chunk for chunk
    request, response = _payloads(evs)
    assert {"field": "return_token_ids", "from": None, "to": True} in request["rewrites"]
    text = _text(got)
    assert text and response["tokens"] == {
        "prompt_ids": PROMPT_IDS,
        "completion_ids": [*VOCAB.encode(text), VOCAB.eos],
        "completion_logprobs": None,
        "render": "server",
    }
    # the recorded answer is the harness's, the ids only in the token record
    assert "prompt_token_ids" not in response["body"]
    assert "token_ids" not in response["body"]["choices"][0]
    assert response["body"]["choices"][0]["message"]["content"] == text
    # without capture: neither asked for nor recorded
    plain_request, plain_response = _payloads(plain_evs)
    assert "tokens" not in plain_response
    assert all(r["field"] != "return_token_ids" for r in plain_request["rewrites"])


@pytest.mark.parametrize("stream", [False, True])
async def test_logprobs_asked_by_the_gateway_are_recorded_not_delivered(
    stream: bool, gateways: dict[str, Gateway], sim: Simulator, http: aiohttp.ClientSession
) -> None:
    plain, _ = await _chat(http, gateways["plain"], stream=stream)
    got, evs = await _chat(http, gateways["logprobs"], stream=stream)
    assert sim.stats.last_request_body is not None
    assert sim.stats.last_request_body["logprobs"] is True
    assert got == plain
    assert all(choice["logprobs"] is None for part in got for choice in part["choices"])
    request, response = _payloads(evs)
    assert {"field": "logprobs", "from": None, "to": True} in request["rewrites"]
    tokens = response["tokens"]
    *sampled, end = tokens["completion_logprobs"]
    # one per word the simulator sampled; its end-of-sequence id carries none
    assert len(sampled) == len(_text(got).split()) and end is None
    assert all(isinstance(lp, float) and lp <= 0 for lp in sampled)
    assert len(tokens["completion_logprobs"]) == len(tokens["completion_ids"])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_harness_that_asked_for_logprobs_keeps_them(
    stream: bool, gateways: dict[str, Gateway], http: aiohttp.ClientSession
) -> None:
    plain, _ = await _chat(http, gateways["plain"], stream=stream, logprobs=True)
    got, evs = await _chat(http, gateways["logprobs"], stream=stream, logprobs=True)
    assert got == plain
    entries = [e for part in got for c in part["choices"] if c["logprobs"]
               for e in c["logprobs"]["content"]]  # fmt: skip
    request, response = _payloads(evs)
    assert entries and all(r["field"] != "logprobs" for r in request["rewrites"])
    recorded = response["tokens"]["completion_logprobs"]
    assert recorded[: len(entries)] == [e["logprob"] for e in entries]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_call_keeps_its_ids(
    stream: bool, gateways: dict[str, Gateway], http: aiohttp.ClientSession
) -> None:
    plain, _ = await _chat(http, gateways["plain"], stream=stream, tools=TOOLS)
    got, evs = await _chat(http, gateways["ids"], stream=stream, tools=TOOLS)
    assert got == plain
    _, response = _payloads(evs)
    completion = response["tokens"]["completion_ids"]
    assert VOCAB.decode(completion, skip_control=False) == (
        '<tool_call>\n{"name":"add","arguments":{"a":1}}\n</tool_call><|im_end|>'
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_translated_call_records_the_ids_too(
    stream: bool, gateways: dict[str, Gateway], http: aiohttp.ClientSession
) -> None:
    """An Anthropic harness in front of the chat upstream: translated both ways."""
    rollout = await register(http, gateways["logprobs"])
    async with anthropic.AsyncAnthropic(
        base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
    ) as client:
        if stream:
            async with client.messages.stream(
                model="m", max_tokens=64, messages=MESSAGES
            ) as answer:
                text = await answer.get_final_text()
        else:
            message = await client.messages.create(model="m", max_tokens=64, messages=MESSAGES)
            text = "".join(block.text for block in message.content if block.type == "text")
    _, response = _payloads(await events(http, gateways["logprobs"], rollout["id"]))
    tokens = response["tokens"]
    assert tokens["prompt_ids"] == PROMPT_IDS and tokens["render"] == "server"
    assert tokens["completion_ids"] == [*VOCAB.encode(text), VOCAB.eos]
    assert len(tokens["completion_logprobs"]) == len(tokens["completion_ids"])
    assert "token_ids" not in response.get("extras", {})


@pytest.mark.parametrize("stream", [False, True])
async def test_the_relay_records_the_servers_reasoning(
    stream: bool, http: aiohttp.ClientSession
) -> None:
    """A reasoning model's ``reasoning_content`` reaches the harness as sent, and the
    response event has it beside the answer; the thought's ids lead the sampled ones."""
    async with Simulator(SimConfig(seed=7, reasoning_tokens=3)) as sim:
        endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", capture_tokens=True)
        async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
            got, evs = await _chat(http, gateway, stream=stream)
    if stream:
        thought = "".join(
            (c["choices"][0]["delta"].get("reasoning_content") or "")
            for c in got if c["choices"]
        )  # fmt: skip
    else:
        thought = got[0]["choices"][0]["message"]["reasoning_content"]
    assert len(thought.split()) == 3
    _, response = _payloads(evs)
    assert response["reasoning"] == thought
    assert response["body"]["choices"][0]["message"]["reasoning_content"] == thought
    expected = [*VOCAB.encode(f"<think>\n{thought}\n</think>\n\n" + _text(got)), VOCAB.eos]
    assert response["tokens"]["completion_ids"] == expected


async def test_a_conversation_the_server_renders_is_one_training_sequence(
    gateways: dict[str, Gateway], http: aiohttp.ClientSession
) -> None:
    """Turn 2's server-rendered prompt starts with turn 1's prompt + sampled ids, so the
    export continues one segment; a rewritten history starts another, without a warning."""
    rollout = await register(http, gateways["ids"])
    messages: list[Any] = [{"role": "user", "content": "hello"}]
    async with openai_client(rollout) as client:
        for turn in range(2):
            reply = await client.chat.completions.create(model="m", messages=messages)
            messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                         {"role": "user", "content": f"more {turn}"}]  # fmt: skip
        await client.chat.completions.create(model="m", messages=[messages[-1]])
    evs = await events(http, gateways["ids"], rollout["id"])
    turns = [token_turn(e["seq"], e["payload"]) for e in evs if e["kind"] == "model_response"]
    assert all(t is not None and t.render == "server" for t in turns)
    segments, placed, warnings = assemble([t for t in turns if t is not None])
    assert (placed, warnings) == ([0, 0, 1], [])
    first, second, _ = turns
    assert first is not None and second is not None
    assert segments[0].tokens[: len(second.prompt_ids)] == second.prompt_ids
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.completion_ids)] == (
        first.prompt_ids + first.completion_ids
    )
