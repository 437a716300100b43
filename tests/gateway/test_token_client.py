"""The token client: any harness dialect, rendered to token ids, sampled from the
simulator's completions routes, answered in the harness's dialect with exact ids kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from transformers import AutoTokenizer

from gateway.simtok import ADD_TOOLS, build_sim_tokenizer
from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import Simulator


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    return build_sim_tokenizer(tmp_path / "tok")


async def _gateway(sim: Simulator, tokenizer: Path, api: str, **endpoint: Any) -> Gateway:
    config = EndpointConfig(
        base_url=sim.base_url, model="sim-model", client="tokens", tokenizer=str(tokenizer),
        completions_api=api, **endpoint,
    )  # fmt: skip
    gateway = Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN))
    await gateway.start()
    return gateway


def _responses(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["payload"] for e in evs if e["kind"] == "model_response"]


@pytest.mark.parametrize("api", ["vllm", "llamacpp", "vllm-generate", "sglang"])
async def test_a_chat_tool_loop_extends_one_token_sequence(
    api: str, sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim, tokenizer_dir, api)
    try:
        rollout = await register(http, gateway)
        messages: list[Any] = [{"role": "user", "content": "add one"}]
        texts = []
        async with openai_client(rollout) as client:
            for turn in range(4):
                reply = await client.chat.completions.create(
                    model="m", messages=messages, tools=ADD_TOOLS
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if message.tool_calls:
                    assert reply.choices[0].finish_reason == "tool_calls"
                    call = message.tool_calls[0]
                    assert call.type == "function" and call.function.name == "add"
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": "2"})
                else:
                    texts.append(message.content or "")
                    messages.append({"role": "user", "content": f"again {turn}"})
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    responses = _responses(evs)
    assert len(responses) == 4 and texts
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    previous: list[int] = []
    for n, response in enumerate(responses):
        tokens = response["tokens"]
        prompt, completion = tokens["prompt_ids"], tokens["completion_ids"]
        assert len(tokens["completion_logprobs"]) == len(completion)
        if n:
            # each prompt is the previous prompt + what was sampled + only the new turns
            assert tokens["render"] == "extend"
            assert prompt[: len(previous)] == previous
        previous = prompt + completion
    sampled = [
        tok.decode(r["tokens"]["completion_ids"], skip_special_tokens=True) for r in responses
    ]
    assert [s for s in sampled if '"arguments"' not in s] == texts
    assert responses[0]["finish_reason"] == "tool_calls"


async def test_an_anthropic_harness_streams_tool_use_from_token_ids(
    sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim, tokenizer_dir, "vllm")
    try:
        rollout = await register(http, gateway)
        async with anthropic.AsyncAnthropic(
            base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
        ) as claude:
            tool = {"name": "add", "description": "add",
                    "input_schema": ADD_TOOLS[0]["function"]["parameters"]}  # fmt: skip
            async with claude.messages.stream(
                model="m", max_tokens=64, tools=[tool],  # type: ignore[list-item]
                messages=[{"role": "user", "content": "add one"}],
            ) as stream:  # fmt: skip
                message = await stream.get_final_message()
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert (use.name, message.stop_reason) == ("add", "tool_use")
    assert isinstance(use.input, dict) and set(use.input) == {"a"}
    (response,) = _responses(evs)
    assert response["dialect"] == "completions.vllm"
    assert (
        response["tokens"]["completion_ids"][-1] == response["body"]["choices"][0]["token_ids"][-1]
    )


async def test_malformed_tool_call_output_is_answered_as_text_and_recorded(
    sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim, tokenizer_dir, "vllm")
    try:
        rollout = await register(http, gateway, sampling={"max_tokens": 6})
        async with openai_client(rollout) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "add"}], tools=ADD_TOOLS
            )
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    message = reply.choices[0].message
    # cut short inside the <tool_call>: plain text, never a crash
    assert not message.tool_calls
    assert (message.content or "").startswith("<tool_call>")
    (response,) = _responses(evs)
    assert response["finish_reason"] == "length"
    assert len(response["tokens"]["completion_ids"]) == 6


async def test_the_first_renderer_warms_at_start_and_ready_waits_for_it(
    sim: Simulator, tokenizer_dir: Path
) -> None:
    gateway = await _gateway(sim, tokenizer_dir, "vllm")
    try:
        (pool,) = gateway.renderers.pools()  # start() began the build, returning at once
        await gateway.ready()
        assert pool.snapshot().ready == 1
    finally:
        await gateway.aclose()
    relay = Gateway(EndpointConfig(base_url=sim.base_url, model="m"),
                    GatewaySettings(admin_token=ADMIN_TOKEN))  # fmt: skip
    async with relay:
        await relay.ready()  # nothing to warm
        assert relay.renderers.pools() == []
