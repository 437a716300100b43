"""Abort and continue when the engine aborts: the simulator, paced, aborts a token
completion mid-way — paused by the gateway's forwarded ``abort`` pause, or on its own weight
update with ``abort_all_requests`` — and answers the ids it had; the token client continues
from prompt + those ids, the harness (the real OpenAI SDK) gets one whole answer, and the
record is exactly prompt + every sampled id with a version span per weight version."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.simtok import build_sim_tokenizer
from helpers import ADMIN_TOKEN, events, openai_client, register, settle
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator
from rolltap.sim.completions_in import TokenPrompt, answer_tokens
from rolltap.sim.vocab import VOCAB

#: long and slow enough that an abort lands mid-answer, whatever the machine's load
CONFIG = SimConfig(seed=7, completion_tokens=64, tokens_per_s=20, policy_version="v1")
MAX_TOKENS = 200


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    return build_sim_tokenizer(tmp_path / "tok")


@pytest.fixture
async def paced() -> AsyncIterator[Simulator]:
    async with Simulator(CONFIG) as simulator:
        yield simulator


async def _gateway(sim: Simulator, tokenizer: Path, api: str, forward: str | None) -> Gateway:
    config = EndpointConfig(
        base_url=sim.base_url, model="sim-model", client="tokens", tokenizer=str(tokenizer),
        completions_api=api, forward_pause=forward,
    )  # fmt: skip
    gateway = Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN))
    await gateway.start()
    return gateway


async def _ask(client: openai.AsyncOpenAI) -> str:
    reply = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=MAX_TOKENS
    )
    assert reply.choices[0].finish_reason == "stop"
    return reply.choices[0].message.content or ""


async def _update(http: aiohttp.ClientSession, sim: Simulator, version: str, abort: bool) -> None:
    body = {"new_version": version, "abort_all_requests": abort}
    async with http.post(sim.url + "/update_weight_version", json=body) as resp:
        assert resp.status == 200, await resp.text()


def _check_record(sim: Simulator, payload: dict[str, Any], answer: str) -> None:
    """Exactly prompt + the ids each part sampled: the first part a prefix of the whole
    answer to the prompt, the rest the simulator's answer to prompt + that prefix — which
    finishes the answer it began: the record is the uncut answer's, ids and logprobs."""
    tokens = payload["tokens"]
    prompt, ids, spans = tokens["prompt_ids"], tokens["completion_ids"], tokens["policy_versions"]
    assert tokens["continued"] == 1
    (first, second) = spans
    cut = first["end"]
    assert first == {"version": "v1", "start": 0, "end": cut}
    assert second == {"version": "v2", "start": cut, "end": len(ids)}
    whole = answer_tokens(TokenPrompt("sim-model", tuple(prompt), MAX_TOKENS), sim.config)
    assert 0 < cut < len(whole.ids) and ids[:cut] == list(whole.ids[:cut])
    rest = answer_tokens(
        TokenPrompt("sim-model", (*prompt, *ids[:cut]), MAX_TOKENS - cut), sim.config
    )
    assert ids[cut:] == list(rest.ids) and ids[-1] == VOCAB.eos
    logprobs = tokens["completion_logprobs"]
    assert logprobs == [*whole.logprobs[:cut], *rest.logprobs]
    assert (ids, logprobs) == (list(whole.ids), list(whole.logprobs))  # as if never cut
    assert answer == VOCAB.decode(ids)  # one whole answer
    assert payload["policy_version"] == "v2" and payload["usage"]["prompt_tokens"] == len(prompt)
    assert sim.stats.aborted == 1


@pytest.mark.parametrize(("api", "engine"), [("sglang", "sglang"), ("vllm", "vllm")])
async def test_a_forwarded_abort_pause_is_continued_after_the_resume(
    api: str, engine: str, paced: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    sim = paced
    gateway = await _gateway(sim, tokenizer_dir, api, engine)
    try:
        await gateway.set_policy_version("v1")
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client, asyncio.TaskGroup() as tasks:
            asked = tasks.create_task(_ask(client))
            await sim.wait_for(lambda s: s.tokens_generated >= 2)
            await gateway.pause("abort")  # the engine aborts: its answer has the ids so far
            await sim.wait_for(lambda s: s.aborted == 1)
            await settle(lambda: _held(gateway) == 1)
            held = time.perf_counter()
            assert sim.stats.requests == 1  # the continuation waits for the resume
            await _update(http, sim, "v2", abort=False)
            await gateway.set_policy_version("v2")
            await gateway.resume()
            resumed = time.perf_counter()
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert [e["kind"] for e in evs] == ["model_request", "model_response"]
    _check_record(sim, evs[1]["payload"], asked.result())
    assert sim.stats.requests == 2
    # its wait at the gate is the call's waited time, not the engine's
    timing = evs[1]["payload"]["timing"]
    assert timing["waited_ms"] >= (resumed - held) * 1000
    assert timing["upstream_ms"] + timing["waited_ms"] <= timing["total_ms"]


async def test_the_engine_aborting_on_its_own_update_is_continued_at_once(
    paced: Simulator, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    sim = paced
    gateway = await _gateway(sim, tokenizer_dir, "sglang", None)
    try:
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client, asyncio.TaskGroup() as tasks:
            asked = tasks.create_task(_ask(client))
            await sim.wait_for(lambda s: s.tokens_generated >= 2)
            await _update(http, sim, "v2", abort=True)  # no pause: the gateway knows nothing
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert [e["kind"] for e in evs] == ["model_request", "model_response"]
    _check_record(sim, evs[1]["payload"], asked.result())
    assert sim.stats.requests == 2 and _held(gateway) == 0


def _held(gateway: Gateway) -> int:
    (state,) = gateway.policy()["endpoints"].values()
    return int(state["held"])
