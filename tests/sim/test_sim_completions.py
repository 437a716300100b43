"""``POST /v1/completions`` over token ids, through the OpenAI SDK and raw HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from openai.types import Completion

from rolltap.sim import SimConfig, Simulator
from rolltap.sim.vocab import VOCAB
from rolltap.sim.words import WORDS
from sim.simkit import completions_body, json_events, prompt_ids, read_events

IDS = prompt_ids()
TOOLS = (
    '<|im_start|>system\n<tools>\n{"type": "function", "function": {"name": "lookup", '
    '"parameters": {"properties": {"query": {"type": "string"}, "n": {"type": "integer"}}}}}\n'
    "</tools><|im_end|>\n<|im_start|>user\nfind it<|im_end|>\n<|im_start|>assistant\n"
)
TOKEN_IDS: dict[str, Any] = {"return_token_ids": True}


async def _text(session: aiohttp.ClientSession, sim: Simulator, body: dict[str, Any]) -> str:
    async with session.post(sim.base_url + "/completions", json=body) as resp:
        text: str = (await resp.json())["choices"][0]["text"]
        return text


def _extra(choice: Any, name: str) -> Any:
    """A vLLM field the SDK's types do not declare."""
    return (choice.model_extra or {}).get(name)


async def test_token_prompt_answers_vocabulary_words_and_eos(client: openai.AsyncOpenAI) -> None:
    reply = await client.completions.create(model="my", prompt=IDS, extra_body=TOKEN_IDS)
    assert reply.id.startswith("cmpl-sim-")
    assert (reply.object, reply.model) == ("text_completion", "my")
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert _extra(choice, "stop_reason") is None
    token_ids = _extra(choice, "token_ids")
    assert _extra(choice, "prompt_token_ids") == IDS
    assert token_ids[-1] == VOCAB.eos  # in the ids, not in the text
    assert choice.text == VOCAB.decode(token_ids)
    assert choice.text.split(" ") == [VOCAB.token(i).strip() for i in token_ids[:-1]]
    assert set(choice.text.split(" ")) <= set(WORDS)
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (len(IDS), 17)
    assert choice.logprobs is None


async def test_same_prompt_same_answer_string_prompt_is_encoded(
    client: openai.AsyncOpenAI,
) -> None:
    first = await client.completions.create(model="m", prompt=IDS)
    again = await client.completions.create(model="m", prompt=[IDS])  # a batch of one
    as_text = await client.completions.create(
        model="m", prompt=VOCAB.decode(IDS, skip_control=False)
    )
    other = await client.completions.create(model="m", prompt=[*IDS, 0])
    assert first.choices[0].text == again.choices[0].text == as_text.choices[0].text
    assert first.choices[0].text != other.choices[0].text


async def test_without_token_ids_vllm_sends_nulls(
    session: aiohttp.ClientSession, sim: Simulator
) -> None:
    async with session.post(sim.base_url + "/completions", json=completions_body()) as resp:
        choice = (await resp.json())["choices"][0]
    assert (choice["prompt_token_ids"], choice["token_ids"], choice["prompt_logprobs"]) == (
        None,
        None,
        None,
    )


@pytest.mark.parametrize("cap", [0, 3, 16])
async def test_max_tokens_caps_the_ids_eos_included(client: openai.AsyncOpenAI, cap: int) -> None:
    whole = await client.completions.create(model="m", prompt=IDS, extra_body=TOKEN_IDS)
    reply = await client.completions.create(
        model="m", prompt=IDS, max_tokens=cap, extra_body=TOKEN_IDS
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "length"  # 16 words + EOS do not fit in 16
    assert _extra(choice, "token_ids") == _extra(whole.choices[0], "token_ids")[:cap]
    assert reply.usage is not None and reply.usage.completion_tokens == cap


async def test_logprobs_with_token_id_strings(client: openai.AsyncOpenAI) -> None:
    extra = {"return_tokens_as_token_ids": True, **TOKEN_IDS}
    reply = await client.completions.create(
        model="m", prompt=IDS, logprobs=2, max_tokens=4, extra_body=extra
    )
    choice = reply.choices[0]
    logprobs = choice.logprobs
    assert logprobs is not None and logprobs.tokens is not None
    ids = [int(t.removeprefix("token_id:")) for t in logprobs.tokens]
    assert ids == _extra(choice, "token_ids")
    assert logprobs.token_logprobs is not None and logprobs.top_logprobs is not None
    assert all(-2.0 <= lp <= 0.0 for lp in logprobs.token_logprobs)
    for token, logprob, top in zip(
        logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs, strict=True
    ):
        assert len(top) == 3 and top[token] == logprob
        assert all(key.startswith("token_id:") and v <= logprob for key, v in top.items())
    assert logprobs.text_offset == _offsets(ids)


def _offsets(ids: list[int]) -> list[int]:
    out, at = [], 0
    for token_id in ids:
        out.append(at)
        at += len(VOCAB.decode([token_id]))
    return out


async def test_logprobs_token_strings_by_default(client: openai.AsyncOpenAI) -> None:
    reply = await client.completions.create(model="m", prompt=IDS, logprobs=0)
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens is not None
    assert "".join(logprobs.tokens[:-1]) == reply.choices[0].text
    assert logprobs.tokens[-1] == "<|im_end|>"
    assert logprobs.top_logprobs is not None and all(len(t) == 1 for t in logprobs.top_logprobs)


async def test_stop_string_cuts_the_text(client: openai.AsyncOpenAI) -> None:
    whole = (await client.completions.create(model="m", prompt=IDS)).choices[0].text
    stop = whole.split(" ")[2]
    reply = await client.completions.create(
        model="m", prompt=IDS, stop=[stop], extra_body=TOKEN_IDS
    )
    choice = reply.choices[0]
    assert choice.text == whole[: whole.index(stop)]
    assert (choice.finish_reason, _extra(choice, "stop_reason")) == ("stop", stop)
    assert VOCAB.eos not in _extra(choice, "token_ids")


async def test_tool_marker_makes_a_hermes_tool_call(client: openai.AsyncOpenAI) -> None:
    reply = await client.completions.create(
        model="m", prompt=VOCAB.encode(TOOLS), extra_body=TOKEN_IDS
    )
    choice = reply.choices[0]
    head, body, tail = choice.text.split("\n")
    assert (head, tail) == ("<tool_call>", "</tool_call>")
    assert orjson.loads(body) == {"name": "lookup", "arguments": {"query": "x", "n": 1}}
    assert _extra(choice, "token_ids")[0] == VOCAB.id_of("<tool_call>")
    assert choice.finish_reason == "stop"


async def test_tool_response_after_the_marker_answers_text(client: openai.AsyncOpenAI) -> None:
    result = "<|im_start|>user\n<tool_response>\nfound\n</tool_response><|im_end|>\n"
    reply = await client.completions.create(model="m", prompt=VOCAB.encode(TOOLS + result))
    assert set(reply.choices[0].text.split(" ")) <= set(WORDS)


async def test_tool_marker_is_configurable(session: aiohttp.ClientSession) -> None:
    body = completions_body(prompt=VOCAB.encode(TOOLS))
    for marker, calls in ((None, False), ("<think>", False), ("<tools>", True)):
        async with Simulator(SimConfig(tool_marker=marker)) as sim:
            text = await _text(session, sim, body)
        assert text.startswith("<tool_call>") is calls


async def test_stream_matches_non_stream(client: openai.AsyncOpenAI) -> None:
    extra = {"return_tokens_as_token_ids": True, **TOKEN_IDS}
    whole = await client.completions.create(model="m", prompt=IDS, logprobs=1, extra_body=extra)
    stream = await client.completions.create(
        model="m", prompt=IDS, logprobs=1, stream=True, extra_body=extra
    )
    chunks: list[Completion] = [chunk async for chunk in stream]
    choices = [c.choices[0] for c in chunks]
    assert "".join(c.text for c in choices) == whole.choices[0].text
    assert [_extra(c, "prompt_token_ids") for c in choices[:2]] == [IDS, None]
    streamed = [i for c in choices for i in _extra(c, "token_ids")]
    assert streamed == _extra(whole.choices[0], "token_ids") and len(chunks) == len(streamed)
    logprobs = whole.choices[0].logprobs
    assert logprobs is not None
    pieces = [c.logprobs for c in choices if c.logprobs is not None]
    assert len(pieces) == len(choices)
    assert [t for p in pieces for t in p.tokens or []] == logprobs.tokens
    assert [o for p in pieces for o in p.text_offset or []] == logprobs.text_offset
    assert [c.finish_reason for c in choices[-2:]] == [None, "stop"]
    assert all(c.usage is None for c in chunks)


async def test_stream_include_usage_and_done(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = completions_body(stream=True, max_tokens=3, stream_options={"include_usage": True})
    async with session.post(sim.base_url + "/completions", json=body) as resp:
        events = await read_events(resp)
    assert events[-1] == b"[DONE]"
    chunks = json_events(events)
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None, None, "length"]
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == []
    usage = {"prompt_tokens": len(IDS), "completion_tokens": 3, "total_tokens": len(IDS) + 3}
    assert usage.items() <= chunks[-1]["usage"].items()


@pytest.mark.parametrize(
    "bad",
    [
        {"prompt": []},
        {"prompt": None},
        {"prompt": [1, True]},
        {"prompt": [len(VOCAB)]},
        {"prompt": [-1]},
        {"prompt": ["a", "b"]},
        {"prompt": [[1], [2]]},
        {"logprobs": 21},
        {"logprobs": True},
        {"max_tokens": -1},
        {"stop": 3},
        {"echo": True},
        {"n": 2},
        {"return_token_ids": "yes"},
    ],
)
async def test_bad_requests_are_400(
    sim: Simulator, session: aiohttp.ClientSession, bad: dict[str, Any]
) -> None:
    async with session.post(sim.base_url + "/completions", json=completions_body(**bad)) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert next(iter(bad)) in error["message"]


async def test_gate_and_fault_on_the_sdk_path(sim: Simulator, client: openai.AsyncOpenAI) -> None:
    gate = sim.gate("g")
    async with asyncio.TaskGroup() as tasks:
        reply = tasks.create_task(
            client.completions.create(model="m", prompt=IDS, extra_headers={"x-sim-gate": "g"})
        )
        await gate.wait_reached()
        assert not reply.done() and sim.stats.completed == 0
        gate.open()
    assert reply.result().choices[0].finish_reason == "stop"
    with pytest.raises(openai.RateLimitError):
        await client.completions.create(
            model="m", prompt=IDS, extra_headers={"x-sim-fault": "status=429"}
        )
    assert sim.stats.faults == {"status": 1}
