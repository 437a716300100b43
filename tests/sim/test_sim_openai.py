"""The simulator through the official OpenAI SDK: text, streams, tools, logprobs, usage."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from rolltap.sim import Simulator
from rolltap.sim.words import WORDS

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say something."}]
TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer"},
                    "score": {"type": "number"},
                    "exact": {"type": "boolean"},
                    "tags": {"type": "array"},
                },
            },
        },
    },
    {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
]
EXPECTED_ARGS = {"query": "x", "limit": 1, "score": 1, "exact": True, "tags": None}


async def test_non_stream_text(client: openai.AsyncOpenAI, sim: Simulator) -> None:
    reply = await client.chat.completions.create(model="my-model", messages=MESSAGES)
    assert reply.id.startswith("chatcmpl-sim-")
    assert reply.object == "chat.completion"
    assert reply.model == "my-model"
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content is not None
    words = choice.message.content.split(" ")
    assert len(words) == 16
    assert set(words) <= set(WORDS)
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 16
    assert reply.usage.prompt_tokens == len("Say something.") // 4 + 1
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 16
    assert sim.stats.completed == 1


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
async def test_max_tokens_caps_with_length(client: openai.AsyncOpenAI, field: str) -> None:
    extra: dict[str, Any] = {field: 5}
    reply = await client.chat.completions.create(model="m", messages=MESSAGES, **extra)
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.content is not None
    assert len(reply.choices[0].message.content.split(" ")) == 5
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 5


async def test_stream_matches_non_stream(client: openai.AsyncOpenAI) -> None:
    whole = await client.chat.completions.create(model="m", messages=MESSAGES)
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    chunks = [chunk async for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert all(c.usage is None for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content
    assert len(chunks) == 16 + 1
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_stream_include_usage(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        max_tokens=3,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-2].choices[0].finish_reason == "length"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.completion_tokens, last.usage.total_tokens) == (
        3,
        last.usage.prompt_tokens + 3,
    )
    assert all(c.usage is None for c in chunks[:-1])


async def test_tool_call_non_stream(client: openai.AsyncOpenAI) -> None:
    reply = await client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.id.startswith("call_sim_")
    assert call.function.name == "lookup"
    assert orjson.loads(call.function.arguments) == EXPECTED_ARGS


async def test_tool_call_stream_fragments_concatenate(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, stream=True
    )
    deltas = [c.choices[0] async for c in stream]
    first = deltas[0].delta.tool_calls
    assert first is not None
    assert first[0].id is not None
    assert first[0].id.startswith("call_sim_")
    assert first[0].type == "function"
    assert first[0].function is not None
    assert first[0].function.name == "lookup"
    fragments = []
    for choice in deltas[1:-1]:
        calls = choice.delta.tool_calls
        assert calls is not None
        assert calls[0].id is None
        assert calls[0].function is not None
        assert calls[0].function.name is None
        fragments.append(calls[0].function.arguments or "")
    assert len(fragments) == 3
    assert orjson.loads("".join(fragments)) == EXPECTED_ARGS
    assert deltas[-1].finish_reason == "tool_calls"


async def test_tool_choice_named_function(client: openai.AsyncOpenAI) -> None:
    reply = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "other"}},
    )
    calls = reply.choices[0].message.tool_calls
    assert calls is not None
    call = calls[0]
    assert call.type == "function"
    assert call.function.name == "other"
    assert call.function.arguments == "{}"


async def test_no_tool_call_when_none_or_after_tool_result(client: openai.AsyncOpenAI) -> None:
    none = await client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, tool_choice="none"
    )
    assert none.choices[0].finish_reason == "stop"
    history: list[ChatCompletionMessageParam] = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_sim_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_sim_1", "content": "42"},
    ]
    after = await client.chat.completions.create(model="m", messages=history, tools=TOOLS)
    assert after.choices[0].finish_reason == "stop"
    assert after.choices[0].message.content


async def test_logprobs_non_stream(client: openai.AsyncOpenAI) -> None:
    reply = await client.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.content is not None
    assert "".join(e.token for e in logprobs.content) == reply.choices[0].message.content
    for entry in logprobs.content:
        assert entry.logprob <= 0
        assert entry.bytes == list(entry.token.encode())
        assert entry.top_logprobs == []
    again = await client.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)
    assert again.choices[0].logprobs == logprobs


async def test_logprobs_stream(client: openai.AsyncOpenAI) -> None:
    whole = await client.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, logprobs=True, stream=True
    )
    streamed = []
    async for chunk in stream:
        choice = chunk.choices[0]
        if choice.finish_reason is None:
            assert choice.logprobs is not None
            assert choice.logprobs.content is not None
            assert [e.token for e in choice.logprobs.content] == [choice.delta.content]
            streamed.extend(choice.logprobs.content)
    assert whole.choices[0].logprobs is not None
    assert streamed == whole.choices[0].logprobs.content


async def test_models_list(client: openai.AsyncOpenAI) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == ["sim-model"]


async def test_sdk_sees_status_faults(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as info:
        await client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-sim-fault": "status=429"}
        )
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.InternalServerError) as server:
        await client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-sim-fault": "status=500"}
        )
    assert server.value.status_code == 500
    assert "retry-after" not in server.value.response.headers


async def test_sdk_sees_reset_as_connection_error(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-sim-fault": "reset"}
        )
