"""``/v1/responses`` through the official OpenAI SDK."""

from __future__ import annotations

import asyncio

import aiohttp
import openai
import orjson
import pytest
from openai.types.responses import (
    FunctionToolParam,
    Response,
    ResponseFunctionToolCall,
    ResponseInputParam,
)

from rolltap.sim import Simulator
from rolltap.sim.words import WORDS
from sim.simkit import read_named_events, responses_body

TOOLS: list[FunctionToolParam] = [
    {
        "type": "function",
        "name": "lookup",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        },
    },
    {"type": "function", "name": "other", "strict": False, "parameters": {"type": "object"}},
]
EXPECTED_ARGS = {"query": "x", "limit": 1}


def _call(response: Response) -> ResponseFunctionToolCall:
    assert len(response.output) == 1
    item = response.output[0]
    assert isinstance(item, ResponseFunctionToolCall)
    return item


async def test_non_stream_text_matches_the_chat_route(client: openai.AsyncOpenAI) -> None:
    response = await client.responses.create(model="my-model", input="Say something.")
    assert response.id.startswith("resp_sim_")
    assert (response.object, response.status, response.model) == (
        "response",
        "completed",
        "my-model",
    )
    assert response.incomplete_details is None
    item = response.output[0]
    assert (item.type, item.id) == ("message", "msg_" + response.id.removeprefix("resp_"))
    words = response.output_text.split(" ")
    assert len(words) == 16
    assert set(words) <= set(WORDS)
    usage = response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (len("Say something.") // 4 + 1, 16)
    assert usage.total_tokens == usage.input_tokens + 16
    chat = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Say something."}]
    )
    assert chat.choices[0].message.content == response.output_text


async def test_input_items_and_instructions_read_like_chat_messages(
    client: openai.AsyncOpenAI,
) -> None:
    items: ResponseInputParam = [
        {"role": "user", "content": "First."},
        {"type": "message", "role": "assistant", "content": "Reply."},
        {"role": "user", "content": [{"type": "input_text", "text": "Second."}]},
    ]
    response = await client.responses.create(model="m", instructions="Be brief.", input=items)
    chat = await client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "First."},
            {"role": "assistant", "content": "Reply."},
            {"role": "user", "content": "Second."},
        ],
    )
    assert response.output_text == chat.choices[0].message.content
    assert response.usage is not None
    assert chat.usage is not None
    assert response.usage.input_tokens == chat.usage.prompt_tokens


async def test_max_output_tokens_makes_it_incomplete(client: openai.AsyncOpenAI) -> None:
    response = await client.responses.create(model="m", input="Say something.", max_output_tokens=5)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert len(response.output_text.split(" ")) == 5
    assert response.max_output_tokens == 5


async def test_stream_matches_non_stream(client: openai.AsyncOpenAI) -> None:
    whole = await client.responses.create(model="m", input="Say something.")
    async with client.responses.stream(model="m", input="Say something.") as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    assert final.output_text == whole.output_text
    assert final.usage == whole.usage
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 16,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text


async def test_incomplete_stream_ends_with_response_incomplete(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = responses_body(stream=True, max_output_tokens=2)
    async with session.post(sim.base_url + "/responses", json=body) as resp:
        events = await read_named_events(resp)
    name, data = events[-1]
    final = orjson.loads(data)
    assert name == final["type"] == "response.incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert all(orjson.loads(d)["type"] == n for n, d in events)


async def test_function_call_non_stream(client: openai.AsyncOpenAI) -> None:
    response = await client.responses.create(model="m", input="Say something.", tools=TOOLS)
    call = _call(response)
    assert call.call_id.startswith("call_sim_")
    assert call.id is not None
    assert call.id.startswith("fc_sim_")
    assert (call.name, orjson.loads(call.arguments)) == ("lookup", EXPECTED_ARGS)
    assert response.status == "completed"


async def test_function_call_stream_in_fragments(client: openai.AsyncOpenAI) -> None:
    async with client.responses.stream(model="m", input="Say something.", tools=TOOLS) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) == 3
    assert orjson.loads("".join(deltas)) == EXPECTED_ARGS
    call = _call(final)
    assert (call.name, orjson.loads(call.arguments)) == ("lookup", EXPECTED_ARGS)


async def test_tool_choice_and_function_call_output(client: openai.AsyncOpenAI) -> None:
    named = await client.responses.create(
        model="m",
        input="Say something.",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "other"},
    )
    assert (_call(named).name, _call(named).arguments) == ("other", "{}")
    none = await client.responses.create(
        model="m", input="Say something.", tools=TOOLS, tool_choice="none"
    )
    assert none.output_text
    call = _call(await client.responses.create(model="m", input="Say something.", tools=TOOLS))
    history: ResponseInputParam = [
        {"role": "user", "content": "Say something."},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": "42"},
    ]
    after = await client.responses.create(model="m", input=history, tools=TOOLS)
    assert after.output[0].type == "message"
    assert after.output_text


@pytest.mark.parametrize(
    "body",
    [{"model": "m"}, {"input": "hi"}, {"model": "m", "input": 3}, {"model": "m", "input": [1]}],
)
async def test_invalid_requests_are_openai_errors(
    sim: Simulator, session: aiohttp.ClientSession, body: dict[str, object]
) -> None:
    async with session.post(sim.base_url + "/responses", json=body) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert error["type"] == "invalid_request_error"


async def test_sdk_raises_its_own_errors(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        await client.responses.create(model="m", input="hi", max_output_tokens=-1)
    assert bad.value.status_code == 400
    with pytest.raises(openai.RateLimitError) as limited:
        await client.responses.create(
            model="m", input="hi", extra_headers={"x-sim-fault": "status=429"}
        )
    assert limited.value.status_code == 429
    assert limited.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.APIConnectionError):
        await client.responses.create(model="m", input="hi", extra_headers={"x-sim-fault": "reset"})


async def test_gate_holds_the_stream_after_response_created(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    gate = sim.gate("g")
    url = sim.base_url + "/responses"
    async with session.post(
        url, json=responses_body(stream=True), headers={"x-sim-gate": "g"}
    ) as resp:
        first = await resp.content.readuntil(b"\n\n")
        assert first.startswith(b"event: response.created\n")
        await gate.wait_reached()
        assert gate.held == 1
        gate.open()
        rest = await read_named_events(resp)
    assert rest[-1][0] == "response.completed"
    await sim.wait_for(lambda s: s.completed == 1)


async def test_gate_holds_the_sdk_call(sim: Simulator, client: openai.AsyncOpenAI) -> None:
    gate = sim.gate("sdk")
    async with asyncio.TaskGroup() as tasks:
        reply = tasks.create_task(
            client.responses.create(model="m", input="hi", extra_headers={"x-sim-gate": "sdk"})
        )
        await gate.wait_reached()
        assert not reply.done()
        gate.open()
    assert reply.result().status == "completed"
