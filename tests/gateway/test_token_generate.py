"""The ``/generate`` backends (vLLM's ``/inference/v1/generate``, SGLang's ``/generate``)
through the gateway against the simulator: a two-turn tool loop, stream and not, the
exact ids and logprobs recorded, endless aborts and malformed answers as documented errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from aiohttp import web

from gateway.simtok import build_sim_tokenizer
from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import Simulator
from rolltap.sim.completions_in import TokenPrompt, answer_tokens
from rolltap.sim.vocab import VOCAB

APIS = ["vllm-generate", "sglang"]
TOOLS: list[Any] = [{
    "type": "function",
    "function": {"name": "add", "description": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
}]  # fmt: skip


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    return build_sim_tokenizer(tmp_path / "tok")


async def _gateway(base_url: str, tokenizer: Path, api: str) -> Gateway:
    config = EndpointConfig(
        base_url=base_url, model="sim-model", client="tokens", tokenizer=str(tokenizer),
        completions_api=api,
    )  # fmt: skip
    gateway = Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN))
    await gateway.start()
    return gateway


async def _ask(client: openai.AsyncOpenAI, messages: list[Any], stream: bool) -> dict[str, Any]:
    """The assistant message (as a dict) and finish reason, streamed or not."""
    if not stream:
        reply = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        first = reply.choices[0]
        return {"message": first.message.model_dump(exclude_none=True),
                "finish": first.finish_reason}  # fmt: skip
    content, finish = "", None
    calls: dict[int, dict[str, str]] = {}
    chunks = await client.chat.completions.create(
        model="m", messages=messages, tools=TOOLS, stream=True
    )
    async for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += (call.function and call.function.name) or ""
                entry["arguments"] += (call.function and call.function.arguments) or ""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls.values()
        ]  # fmt: skip
    return {"message": message, "finish": finish}


def _sent_and_sampled(api: str, body: dict[str, Any]) -> tuple[list[int], list[float]]:
    """The ids and logprobs as the upstream's recorded body has them."""
    if api == "sglang":
        entries = body["meta_info"]["output_token_logprobs"]
        assert [e[1] for e in entries] == body["output_ids"]
        return body["output_ids"], [e[0] for e in entries]
    choice = body["choices"][0]
    return choice["token_ids"], [c["logprob"] for c in choice["logprobs"]["content"]]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", APIS)
async def test_a_two_turn_tool_loop_records_exact_ids_and_logprobs(
    api: str, stream: bool, sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim.base_url, tokenizer_dir, api)
    try:
        rollout = await register(http, gateway)
        messages: list[Any] = [{"role": "user", "content": "add one"}]
        async with openai_client(rollout) as client:
            first = await _ask(client, messages, stream)
            assert first["finish"] == "tool_calls"
            (call,) = first["message"]["tool_calls"]
            assert call["function"]["name"] == "add" and '"a"' in call["function"]["arguments"]
            messages += [first["message"],
                         {"role": "tool", "tool_call_id": call["id"], "content": "2"}]  # fmt: skip
            second = await _ask(client, messages, stream)
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert second["finish"] == "stop" and second["message"]["content"]
    responses = [e["payload"] for e in evs if e["kind"] == "model_response"]
    assert len(responses) == 2
    previous: list[int] = []
    for response in responses:
        assert response["dialect"] == f"completions.{api}"
        tokens = response["tokens"]
        prompt, completion = tokens["prompt_ids"], tokens["completion_ids"]
        # the simulator's own answer to exactly these prompt ids: ids and logprobs kept
        want = answer_tokens(TokenPrompt("sim-model", tuple(prompt)), sim.config)
        assert completion == list(want.ids) and completion[-1] == VOCAB.eos
        assert tokens["completion_logprobs"] == list(want.logprobs)
        assert _sent_and_sampled(api, response["body"]) == (completion, list(want.logprobs))
        assert prompt[: len(previous)] == previous  # the later prompt extends the earlier
        previous = prompt + completion
    assert responses[1]["tokens"]["render"] == "extend"
    assert VOCAB.decode(responses[1]["tokens"]["completion_ids"]) == second["message"]["content"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", APIS)
async def test_a_generation_aborted_every_time_ends_upstream_aborted(
    api: str, stream: bool, sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    """An aborted generation is continued (abort and continue); one the engine aborts on
    every try, with no id sampled, ends ``upstream_aborted`` after the bounded number of
    continuations."""
    gateway = await _gateway(sim.base_url, tokenizer_dir, api)
    try:
        # a run setting the canonical model has no field for goes upstream as named: the
        # simulator's cue to abort
        rollout = await register(http, gateway, sampling={"sim_abort": True})
        async with openai_client(rollout) as client:
            with pytest.raises(openai.APIError) as info:
                await _ask(client, [{"role": "user", "content": "hi"}], stream)
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    body: Any = info.value.body
    assert body is not None and body["code"] == "upstream_aborted"
    assert "gave up after 16 continuations" in body["message"]
    assert sim.stats.requests == 17
    assert [e["kind"] for e in evs] == ["model_request", "model_error"]
    assert evs[1]["payload"]["code"] == "upstream_aborted"


# fmt: off
MALFORMED: list[tuple[str, dict[str, Any]]] = [
    ("vllm-generate", {"choices": [{"finish_reason": "stop"}]}),  # no token_ids
    ("vllm-generate", {"choices": [{"token_ids": [1, 2], "finish_reason": "stop",
                                    "logprobs": {"content": [{"logprob": -1.0}]}}]}),
    ("vllm-generate", {"choices": [{"token_ids": ["a"], "finish_reason": "stop"}]}),
    ("sglang", {"text": "hi", "meta_info": {"prompt_tokens": 1, "completion_tokens": 1}}),
    ("sglang", {"output_ids": [1], "meta_info": {
        "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": {"type": "stop"},
        "output_token_logprobs": [[-0.5, 2, None]]}}),  # ids that disagree
    ("sglang", {"output_ids": [1]}),  # no meta_info
]
# fmt: on


@pytest.fixture
async def canned() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A tiny server answering both /generate routes with the next canned body."""
    bodies: list[dict[str, Any]] = []

    async def answer(request: web.Request) -> web.Response:
        bodies.append({"request": request.path, **await request.json()})
        return web.json_response(bodies.pop(0))

    app = web.Application()
    app.router.add_post("/generate", answer)
    app.router.add_post("/inference/v1/generate", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1", bodies  # the requests are appended after
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(("api", "answer"), MALFORMED)
async def test_a_malformed_answer_is_upstream_bad_response(
    api: str, answer: dict[str, Any], canned: tuple[str, list[dict[str, Any]]],
    tokenizer_dir: Path, http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    url, bodies = canned
    bodies.append(answer)
    gateway = await _gateway(url, tokenizer_dir, api)
    try:
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client:
            with pytest.raises(openai.APIStatusError) as info:
                await _ask(client, [{"role": "user", "content": "hi"}], False)
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert info.value.status_code == 502
    assert [b["request"] for b in bodies] == [("/generate" if api == "sglang"
                                                else "/inference/v1/generate")]  # fmt: skip
    body: Any = info.value.body
    assert body["code"] == "upstream_bad_response"
    assert evs[-1]["kind"] == "model_error"


GOOD: dict[str, dict[str, Any]] = {
    "vllm-generate": {"choices": [{"token_ids": [5, VOCAB.eos], "finish_reason": "stop",
                                   "logprobs": None}]},  # no usage: counted from ids
    "sglang": {"output_ids": [5, VOCAB.eos], "meta_info": {
        "prompt_tokens": 9, "completion_tokens": 2,
        "finish_reason": {"type": "stop", "matched": VOCAB.eos}}},
}  # fmt: skip


@pytest.mark.parametrize("api", APIS)
async def test_the_request_is_at_the_root_bounded_and_whole(
    api: str, canned: tuple[str, list[dict[str, Any]]], tokenizer_dir: Path,
    http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    url, bodies = canned
    bodies.append(GOOD[api])
    gateway = await _gateway(url, tokenizer_dir, api)
    try:
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    (sent,) = bodies
    (response,) = [e["payload"] for e in evs if e["kind"] == "model_response"]
    prompt = response["tokens"]["prompt_ids"]
    params = sent["sampling_params"]
    assert sent["stream"] is False  # the upstream is read whole
    if api == "sglang":
        assert sent["request"] == "/generate" and sent["input_ids"] == prompt
        assert params["max_new_tokens"] > 0 and VOCAB.eos in params["stop_token_ids"]
        assert sent["return_logprob"] is True and params["skip_special_tokens"] is False
    else:
        assert sent["request"] == "/inference/v1/generate" and sent["token_ids"] == prompt
        assert params["max_tokens"] > 0 and params["logprobs"] == 0
        assert sent["model"] == "sim-model"
    assert reply.choices[0].message.content == VOCAB.decode([5])
    assert reply.usage is not None and reply.usage.completion_tokens == 2
    if api == "vllm-generate":
        assert reply.usage.prompt_tokens == len(prompt)
    assert response["tokens"]["completion_logprobs"] is None


async def test_an_sglang_stream_answer_is_read_from_its_last_chunk_only(
    tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    # a server that streams although asked not to: cumulative chunks, never concatenated
    chunks = [{"output_ids": [5][:n] + [VOCAB.eos][: n - 1], "meta_info": {
        "prompt_tokens": 9, "completion_tokens": n,
        "finish_reason": {"type": "stop", "matched": VOCAB.eos} if n == 2 else None}}
        for n in (1, 2)]  # fmt: skip
    sse = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"

    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=sse, content_type="text/event-stream")

    app = web.Application()
    app.router.add_post("/generate", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    gateway = await _gateway(f"http://127.0.0.1:{runner.addresses[0][1]}/v1", tokenizer_dir,
                             "sglang")  # fmt: skip
    try:
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
        await runner.cleanup()
    (response,) = [e["payload"] for e in evs if e["kind"] == "model_response"]
    assert response["tokens"]["completion_ids"] == [5, VOCAB.eos]
    assert reply.choices[0].message.content == VOCAB.decode([5])
