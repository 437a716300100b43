"""The official OpenAI SDK through the gateway to the simulator, and what gets recorded."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from helpers import events, openai_client, register
from rolltap.gateway import Gateway
from rolltap.sim import Simulator

TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "add two numbers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    }
]


def kinds(evs: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in evs]


async def test_non_streaming_call_is_relayed_and_recorded(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway, user="alice", metadata={"task": 1})
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="whatever-the-harness-says",
            messages=[{"role": "user", "content": "hello"}],
            temperature=0.5,
        )
    assert reply.choices[0].message.content
    evs = await events(http, gateway, rollout["id"])
    assert kinds(evs) == ["model_request", "model_response"]
    request, response = (e["payload"] for e in evs)
    assert request["messages"] == [{"role": "user", "content": "hello"}]
    assert request["params"]["temperature"] == 0.5
    assert request["params"]["model"] == "sim-model"
    assert request["rewrites"] == [
        {"field": "model", "from": "whatever-the-harness-says", "to": "sim-model"}
    ]
    # the upstream saw the rewritten model, not the harness's
    assert sim.stats.last_request_body is not None
    assert sim.stats.last_request_body["model"] == "sim-model"
    assert response["body"]["choices"][0]["message"]["content"] == reply.choices[0].message.content
    assert response["usage"]["completion_tokens"] == reply.usage.completion_tokens  # type: ignore[union-attr]
    assert response["finish_reason"] == "stop"
    assert response["timing"]["total_ms"] >= response["timing"]["ttfb_ms"] >= 0
    assert gateway.snapshot()["intercepts"] == 0


async def test_streaming_call_relays_chunks_and_records_the_folded_message(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "stream please"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
    # the harness did not ask for usage, so the gateway's usage chunk is not relayed
    assert all(chunk.choices for chunk in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert sim.stats.last_request_body is not None
    assert sim.stats.last_request_body["stream_options"] == {"include_usage": True}
    request, response = (e["payload"] for e in await events(http, gateway, rollout["id"]))
    assert {"field": "stream_options.include_usage", "from": None, "to": True} in request[
        "rewrites"
    ]
    assert response["stream"] is True
    assert response["body"]["choices"][0]["message"]["content"] == text
    assert response["usage"]["completion_tokens"] > 0
    assert response["chunks"] >= len(chunks)
    assert response["timing"]["ttfc_ms"] is not None


async def test_usage_chunk_relayed_when_the_harness_asked(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None and not chunks[-1].choices
    request = (await events(http, gateway, rollout["id"]))[0]["payload"]
    assert [r["field"] for r in request["rewrites"]] == ["model"]


async def test_tool_calls_non_streaming(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "add 1 and 1"}], tools=TOOLS
        )
    call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "add"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"a": 1, "b": 1}  # type: ignore[union-attr]
    request, response = (e["payload"] for e in await events(http, gateway, rollout["id"]))
    assert request["params"]["tools"] == TOOLS
    assert response["finish_reason"] == "tool_calls"


async def test_tool_calls_streaming_are_folded_whole(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "add"}], tools=TOOLS, stream=True
        )
        fragments = [
            tc.function.arguments or ""
            async for chunk in stream
            for tc in (chunk.choices[0].delta.tool_calls or [])
            if tc.function is not None
        ]
    assert len(fragments) > 1
    response = (await events(http, gateway, rollout["id"]))[1]["payload"]
    recorded = response["body"]["choices"][0]["message"]["tool_calls"]
    assert recorded[0]["function"]["name"] == "add"
    assert recorded[0]["function"]["arguments"] == "".join(fragments)
    assert json.loads(recorded[0]["function"]["arguments"]) == {"a": 1, "b": 1}
    assert response["finish_reason"] == "tool_calls"


async def test_twenty_turn_conversation_stores_each_message_once(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    messages: list[ChatCompletionMessageParam] = [{"role": "system", "content": "You are terse."}]
    async with openai_client(rollout) as client:
        for turn in range(20):
            messages.append({"role": "user", "content": f"turn {turn}"})
            reply = await client.chat.completions.create(model="m", messages=messages)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        # a side call with its own system prompt extends nothing: stored whole
        side: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "Summarize."},
            {"role": "user", "content": "everything"},
        ]
        await client.chat.completions.create(model="m", messages=side)
    requests = [e["payload"] for e in await events(http, gateway, rollout["id"])][0::2]
    stored = [m for r in requests[:20] for m in r["messages"]]
    assert stored == messages[:-1]  # every message sent, each exactly once
    assert requests[0]["prefix_messages"] == 0 and requests[0]["prefix_digest"] is None
    assert requests[5]["prefix_messages"] == 10  # system + 5 user/assistant pairs before
    assert requests[20]["prefix_messages"] == 0
    assert requests[20]["messages"] == side


async def test_models_route_lists_the_endpoint_model(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["sim-model"]
