"""Abort and continue through the gateway: a token completion an ``abort`` pause cuts is
sent again after the resume and the harness (the real OpenAI SDK) gets one whole answer,
recorded as exactly prompt + sampled ids with ``continued`` and a version span; a
streaming harness gets keepalives while it waits; a relayed call cut the same way ends
``upstream_aborted``, recorded with the policy version."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.simtok import build_sim_tokenizer
from helpers import ADMIN_TOKEN, events, openai_client, register, settle
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import Simulator
from rolltap.sim.completions_in import TokenPrompt, answer_tokens
from rolltap.sim.vocab import VOCAB

#: the simulator holds a request sent with this header at the gate of that name
GATE = {"x-sim-gate": "cut"}
#: where each flavor's request holds the prompt ids
PROMPT_FIELD = {"vllm": "prompt", "sglang": "input_ids"}


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    return build_sim_tokenizer(tmp_path / "tok")


async def _gateway(
    sim: Simulator, tokenizer: Path | None, api: str | None, **settings: Any
) -> Gateway:
    tokens = {} if tokenizer is None else {
        "client": "tokens", "tokenizer": str(tokenizer), "completions_api": api}  # fmt: skip
    config = EndpointConfig(base_url=sim.base_url, model="sim-model", **tokens)
    gateway = Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN, **settings))
    await gateway.start()
    return gateway


def _gate_state(gateway: Gateway) -> dict[str, Any]:
    (state,) = gateway.policy()["endpoints"].values()
    return dict(state)


async def _cut_then_resume(sim: Simulator, gateway: Gateway, version: str) -> None:
    """Once the simulator holds the call's request: an abort pause, the version changed
    while paused, then the resume (the simulator's gate opened first)."""
    await sim.gate("cut").wait_reached()
    assert (await gateway.pause("abort"))["cut"] == 1
    await settle(lambda: _gate_state(gateway)["held"] == 1)  # the continuation waits
    await sim.wait_for(lambda s: s.disconnected == 1)  # the cut request's connection closed
    assert sim.stats.requests == 1  # nothing resent while paused
    await gateway.set_policy_version(version)
    sim.gate("cut").open()
    await gateway.resume()


async def _ask(client: openai.AsyncOpenAI, stream: bool) -> str:
    messages: Any = [{"role": "user", "content": "hi"}]
    if not stream:
        reply = await client.chat.completions.create(
            model="m", messages=messages, extra_headers=GATE
        )
        assert reply.choices[0].finish_reason == "stop"
        return reply.choices[0].message.content or ""
    chunks = await client.chat.completions.create(
        model="m", messages=messages, stream=True, extra_headers=GATE
    )
    text, finish = "", None
    async for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert finish == "stop"
    return text


@pytest.mark.parametrize(("api", "stream"), [("vllm", False), ("sglang", True)])
async def test_an_abort_pause_cuts_a_completion_continued_after_the_resume(
    api: str, stream: bool, sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim, tokenizer_dir, api)
    try:
        await gateway.set_policy_version("v1")
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client, asyncio.TaskGroup() as tasks:
            asked = tasks.create_task(_ask(client, stream))
            await _cut_then_resume(sim, gateway, "v2")
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert [e["kind"] for e in evs] == ["model_request", "model_response"]
    response = evs[1]["payload"]
    tokens = response["tokens"]
    prompt, completion = tokens["prompt_ids"], tokens["completion_ids"]
    # the simulator's whole answer to the prompt: the resent request was the first one again
    want = answer_tokens(TokenPrompt("sim-model", tuple(prompt)), sim.config)
    assert sim.stats.last_request_body[PROMPT_FIELD[api]] == prompt
    assert completion == list(want.ids) and tokens["completion_logprobs"] == list(want.logprobs)
    assert asked.result() == VOCAB.decode(completion)  # one whole answer
    assert tokens["continued"] == 1 and sim.stats.requests == 2
    assert tokens["policy_versions"] == [{"version": "v2", "start": 0, "end": len(completion)}]
    assert response["policy_version"] == "v2"
    assert response["usage"]["prompt_tokens"] == len(prompt)
    assert response["usage"]["completion_tokens"] == len(completion)


async def test_a_streaming_harness_gets_keepalives_while_the_cut_completion_waits(
    sim: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim, tokenizer_dir, "sglang", keepalive_s=0.01)
    try:
        rollout = await register(http, gateway)
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        headers = {"Authorization": f"Bearer {rollout['api_key']}", **GATE}
        url = rollout["openai_base_url"] + "/chat/completions"
        heard = asyncio.Event()

        async def harness() -> bytes:
            async with http.post(url, json=body, headers=headers) as resp:
                assert resp.status == 200  # the reply opened once the part was cut
                seen = b""
                while chunk := await resp.content.readany():
                    seen += chunk
                    if b": keepalive" in seen:
                        heard.set()
                return seen

        async with asyncio.TaskGroup() as tasks:
            streamed = tasks.create_task(harness())
            await sim.gate("cut").wait_reached()
            await gateway.pause("abort")
            await heard.wait()  # the harness hears from the gateway while it is paused
            assert _gate_state(gateway)["paused"] == "abort" and sim.stats.requests == 1
            sim.gate("cut").open()
            await gateway.resume()
        seen = streamed.result()
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert b"data: [DONE]" in seen and b'"finish_reason":"stop"' in seen
    assert evs[-1]["kind"] == "model_response" and evs[-1]["payload"]["tokens"]["continued"] == 1


async def test_a_relayed_call_cut_by_an_abort_pause_ends_upstream_aborted(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    gateway = await _gateway(sim, None, None)
    try:
        await gateway.set_policy_version("v1")
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client:

            async def refused() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    await client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "hi"}],
                        extra_headers=GATE,
                    )  # fmt: skip
                return info.value

            async with asyncio.TaskGroup() as tasks:
                asked = tasks.create_task(refused())
                await sim.gate("cut").wait_reached()
                await gateway.pause("abort")
            await gateway.resume()
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert asked.result().status_code == 503
    body: Any = asked.result().body
    assert body["code"] == "upstream_aborted"
    assert [e["kind"] for e in evs] == ["model_request", "model_error"]
    error = evs[1]["payload"]
    assert error["code"] == "upstream_aborted" and error["policy_version"] == "v1"
    assert sim.stats.requests == 1  # a relay resends nothing
