"""``/v1/messages`` and count_tokens through the official Anthropic SDK."""

from __future__ import annotations

import asyncio
from unittest.mock import ANY

import aiohttp
import anthropic
import openai
import orjson
import pytest
from anthropic.types import MessageParam, TextBlock, ToolParam, ToolUseBlock

from rolltap.sim import Simulator
from rolltap.sim.words import WORDS
from sim.simkit import messages_body, read_named_events

USER: list[MessageParam] = [{"role": "user", "content": "Say something."}]
TOOLS: list[ToolParam] = [
    {
        "name": "lookup",
        "description": "Look something up.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer"},
                "exact": {"type": "boolean"},
            },
        },
    },
    {"name": "other", "input_schema": {"type": "object"}},
]
EXPECTED_INPUT = {"query": "x", "limit": 1, "exact": True}


def _text(message: anthropic.types.Message) -> str:
    assert len(message.content) == 1
    block = message.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def _tool_use(message: anthropic.types.Message) -> ToolUseBlock:
    assert len(message.content) == 1
    block = message.content[0]
    assert isinstance(block, ToolUseBlock)
    return block


async def test_non_stream_text_matches_the_chat_route(
    claude: anthropic.AsyncAnthropic, client: openai.AsyncOpenAI
) -> None:
    message = await claude.messages.create(model="claude-x", max_tokens=100, messages=USER)
    assert message.id.startswith("msg_sim_")
    assert (message.type, message.role, message.model) == ("message", "assistant", "claude-x")
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    words = _text(message).split(" ")
    assert len(words) == 16
    assert set(words) <= set(WORDS)
    assert message.usage.input_tokens == len("Say something.") // 4 + 1
    assert message.usage.output_tokens == 16
    chat = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Say something."}]
    )
    assert chat.choices[0].message.content == _text(message)


async def test_max_tokens_caps_with_max_tokens_stop(claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(model="m", max_tokens=5, messages=USER)
    assert message.stop_reason == "max_tokens"
    assert len(_text(message).split(" ")) == 5
    assert message.usage.output_tokens == 5


async def test_stop_sequence_ends_the_text(claude: anthropic.AsyncAnthropic) -> None:
    whole = _text(await claude.messages.create(model="m", max_tokens=100, messages=USER))
    stop = " " + whole.split(" ")[3]
    message = await claude.messages.create(
        model="m", max_tokens=100, messages=USER, stop_sequences=["never there", stop]
    )
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", stop)
    assert _text(message) == whole[: whole.index(stop)]


async def test_stream_matches_non_stream(claude: anthropic.AsyncAnthropic) -> None:
    whole = await claude.messages.create(model="m", max_tokens=100, messages=USER)
    async with claude.messages.stream(model="m", max_tokens=100, messages=USER) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert len(pieces) == 16
    assert "".join(pieces) == _text(final) == _text(whole)
    assert final.id.startswith("msg_sim_")
    assert final.stop_reason == "end_turn"
    assert final.usage == whole.usage


async def test_stream_event_order(sim: Simulator, session: aiohttp.ClientSession) -> None:
    body = messages_body(stream=True, max_tokens=3)
    async with session.post(sim.url + "/v1/messages", json=body) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        events = await read_named_events(resp)
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(orjson.loads(data)["type"] == name for name, data in events)
    start = orjson.loads(events[0][1])["message"]
    assert (start["content"], start["stop_reason"]) == ([], None)
    assert start["usage"]["output_tokens"] == 0
    delta = orjson.loads(events[-2][1])
    assert delta["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert delta["usage"] == {"output_tokens": 3}


async def test_tool_use_non_stream(claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(model="m", max_tokens=100, messages=USER, tools=TOOLS)
    assert message.stop_reason == "tool_use"
    block = _tool_use(message)
    assert block.id.startswith("toolu_sim_")
    assert (block.name, block.input) == ("lookup", EXPECTED_INPUT)


async def test_tool_use_stream_in_fragments(
    claude: anthropic.AsyncAnthropic, sim: Simulator, session: aiohttp.ClientSession
) -> None:
    async with claude.messages.stream(
        model="m", max_tokens=100, messages=USER, tools=TOOLS
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert (_tool_use(final).name, _tool_use(final).input) == ("lookup", EXPECTED_INPUT)
    body = messages_body(stream=True, tools=TOOLS)
    async with session.post(sim.url + "/v1/messages", json=body) as resp:
        events = [orjson.loads(data) for _, data in await read_named_events(resp)]
    start = events[1]["content_block"]
    assert (start["type"], start["name"], start["input"]) == ("tool_use", "lookup", {})
    partial = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert len(partial) == 3
    assert orjson.loads("".join(partial)) == EXPECTED_INPUT


async def test_tool_choice_and_tool_results(claude: anthropic.AsyncAnthropic) -> None:
    named = await claude.messages.create(
        model="m",
        max_tokens=100,
        messages=USER,
        tools=TOOLS,
        tool_choice={"type": "tool", "name": "other"},
    )
    assert (_tool_use(named).name, _tool_use(named).input) == ("other", {})
    none = await claude.messages.create(
        model="m", max_tokens=100, messages=USER, tools=TOOLS, tool_choice={"type": "none"}
    )
    assert none.stop_reason == "end_turn"
    call = _tool_use(
        await claude.messages.create(model="m", max_tokens=100, messages=USER, tools=TOOLS)
    )
    history: list[MessageParam] = [
        *USER,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "42"}],
        },
    ]
    after = await claude.messages.create(model="m", max_tokens=100, messages=history, tools=TOOLS)
    assert after.stop_reason == "end_turn"
    assert _text(after)


async def test_count_tokens_matches_usage(claude: anthropic.AsyncAnthropic) -> None:
    messages: list[MessageParam] = [
        {"role": "user", "content": [{"type": "text", "text": "A longer question, in parts."}]},
        {"role": "assistant", "content": "An answer."},
        {"role": "user", "content": "And again?"},
    ]
    system = "You are terse."
    count = await claude.messages.count_tokens(
        model="m", system=system, messages=messages, tools=TOOLS
    )
    reply = await claude.messages.create(
        model="m", max_tokens=100, system=system, messages=messages
    )
    assert count.input_tokens == reply.usage.input_tokens
    chars = len(system) + sum(
        len(t) for t in ("A longer question, in parts.", "An answer.", "And again?")
    )
    assert count.input_tokens == chars // 4 + 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_tokens": None}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": [1]}]}, "messages.0.content.0"),
        ({"model": None}, "model"),
    ],
)
async def test_invalid_requests_are_anthropic_errors(
    sim: Simulator, session: aiohttp.ClientSession, change: dict[str, object], field: str
) -> None:
    async with session.post(sim.url + "/v1/messages", json=messages_body(**change)) as resp:
        assert resp.status == 400
        error = await resp.json()
    assert error == {"type": "error", "error": {"type": "invalid_request_error", "message": ANY}}
    assert error["error"]["message"].startswith(field + ":")


async def test_sdk_raises_its_own_errors(claude: anthropic.AsyncAnthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as bad:
        await claude.messages.create(model="m", max_tokens=10, messages=[])
    assert bad.value.status_code == 400
    with pytest.raises(anthropic.RateLimitError) as limited:
        await claude.messages.create(
            model="m", max_tokens=10, messages=USER, extra_headers={"x-sim-fault": "status=429"}
        )
    assert limited.value.status_code == 429
    assert limited.value.response.headers["retry-after"] == "1"
    assert limited.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "simulated fault: HTTP 429"},
    }
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        await claude.messages.create(
            model="m", max_tokens=10, messages=USER, extra_headers={"x-sim-fault": "status=529"}
        )
    assert overloaded.value.status_code == 529
    assert isinstance(overloaded.value.body, dict)
    assert overloaded.value.body["error"]["type"] == "overloaded_error"
    with pytest.raises(anthropic.APIConnectionError):
        await claude.messages.create(
            model="m", max_tokens=10, messages=USER, extra_headers={"x-sim-fault": "reset"}
        )


async def test_gate_holds_the_stream_after_message_start(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    gate = sim.gate("g")
    body = messages_body(stream=True)
    async with session.post(
        sim.url + "/v1/messages", json=body, headers={"x-sim-gate": "g"}
    ) as resp:
        first = await resp.content.readuntil(b"\n\n")
        assert first.startswith(b"event: message_start\n")
        await gate.wait_reached()
        assert gate.held == 1
        gate.open()
        rest = await read_named_events(resp)
    assert rest[-1][0] == "message_stop"
    await sim.wait_for(lambda s: s.completed == 1)


async def test_gate_holds_the_sdk_call(sim: Simulator, claude: anthropic.AsyncAnthropic) -> None:
    gate = sim.gate("sdk")
    async with asyncio.TaskGroup() as tasks:
        reply = tasks.create_task(
            claude.messages.create(
                model="m", max_tokens=10, messages=USER, extra_headers={"x-sim-gate": "sdk"}
            )
        )
        await gate.wait_reached()
        assert not reply.done()
        gate.open()
    assert reply.result().stop_reason == "max_tokens"
