"""The token client with a reasoning parser on, against a simulator that reasons: each
harness gets the reasoning in its dialect's field, and the sampled reasoning ids stay in
the token sequence although the template drops reasoning when it renders history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from transformers import AutoTokenizer

from gateway.simtok import ADD_TOOLS, build_sim_tokenizer
from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ConfigError
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator


@pytest.fixture
async def thinking_sim() -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=7, reasoning_tokens=5)) as simulator:
        yield simulator


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    return build_sim_tokenizer(tmp_path / "tok")


@pytest.fixture
async def gateway(thinking_sim: Simulator, tokenizer_dir: Path) -> AsyncIterator[Gateway]:
    config = EndpointConfig(
        base_url=thinking_sim.base_url, model="sim-model", client="tokens",
        tokenizer=str(tokenizer_dir), reasoning_parser="think",
    )  # fmt: skip
    async with Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN)) as gw:
        yield gw


def _responses(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["payload"] for e in evs if e["kind"] == "model_response"]


async def test_chat_gets_reasoning_content_and_the_sequence_keeps_the_reasoning_ids(
    gateway: Gateway, tokenizer_dir: Path, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    messages: list[Any] = [{"role": "user", "content": "add one"}]
    reasoning = []
    async with openai_client(rollout) as client:
        for _ in range(2):
            reply = await client.chat.completions.create(
                model="m", messages=messages, tools=ADD_TOOLS
            )
            message = reply.choices[0].message
            reasoning.append((message.model_extra or {}).get("reasoning_content"))
            assert "<think>" not in (message.content or "")
            messages.append(message.model_dump(exclude_none=True))
            if message.tool_calls:
                call = message.tool_calls[0]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "2"})
    evs = await events(http, gateway, rollout["id"])
    first, second = _responses(evs)
    assert first["finish_reason"] == "tool_calls"
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    sampled = str(tok.decode(first["tokens"]["completion_ids"]))
    assert all(isinstance(r, str) and len(r.split()) == 5 for r in reasoning)
    assert sampled.startswith(f"<think>\n{reasoning[0]}\n</think>")
    # the template renders no reasoning, yet turn 2 extends turn 1's prompt + sampled ids
    earlier = first["tokens"]["prompt_ids"] + first["tokens"]["completion_ids"]
    assert second["tokens"]["render"] == "extend"
    assert second["tokens"]["prompt_ids"][: len(earlier)] == earlier


async def test_anthropic_gets_thinking_and_responses_gets_a_reasoning_item(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with anthropic.AsyncAnthropic(
        base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
    ) as claude:
        message = await claude.messages.create(
            model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    (thinking,) = [b for b in message.content if b.type == "thinking"]
    (text,) = [b for b in message.content if b.type == "text"]
    assert len(thinking.thinking.split()) == 5 and "<think>" not in text.text
    async with openai_client(rollout) as client:
        response = await client.responses.create(model="m", input="hi again")
    (item,) = [i for i in response.output if i.type == "reasoning"]
    assert len(" ".join(s.text for s in item.summary).split()) == 5
    assert "<think>" not in response.output_text


async def test_reasoning_cut_short_is_plain_text_with_the_problem_recorded(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway, sampling={"max_tokens": 4})
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    message = reply.choices[0].message
    assert (message.content or "").startswith("<think>")
    assert "reasoning_content" not in (message.model_extra or {})
    (response,) = _responses(await events(http, gateway, rollout["id"]))
    assert response["finish_reason"] == "length"
    assert response["parse_problems"] == ["unterminated <think> at character 0"]


async def test_openai_with_think_is_refused_at_start(
    thinking_sim: Simulator, tmp_path: Path
) -> None:
    config = EndpointConfig(
        base_url=thinking_sim.base_url, model="m", client="tokens",
        tokenizer=str(build_sim_tokenizer(tmp_path / "tok")), tool_parser="openai",
        reasoning_parser="think",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="Harmony"):
        async with Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN)):
            pass
