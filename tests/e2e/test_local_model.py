"""End to end against the real llama-server with Gemma 3 270M (the `local` extra)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import anthropic
import pytest

from helpers import ADMIN_TOKEN, events, openai_client, register, require_local_extra
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.local import LocalModel

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]


@pytest.fixture
async def local_model() -> AsyncIterator[LocalModel]:
    require_local_extra()
    async with LocalModel() as model:
        yield model


@pytest.fixture
async def local_gateway(local_model: LocalModel) -> AsyncIterator[Gateway]:
    endpoint = EndpointConfig(name="local", base_url=local_model.base_url, model=local_model.model)
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        yield gateway


async def test_pattern_continuation_non_streaming(
    local_gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, local_gateway)
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="anything",
            messages=[{"role": "user", "content": "1, 2, 3, 4, 5,"}],
            max_tokens=6,
            temperature=0,
        )
    text = reply.choices[0].message.content or ""
    assert text.strip().startswith("6")
    assert reply.model == "gemma-3-270m"  # the served alias, not the GGUF file's path
    request, response = (e["payload"] for e in await events(http, local_gateway, rollout["id"]))
    assert request["params"]["model"] == "gemma-3-270m"
    assert response["usage"]["completion_tokens"] == reply.usage.completion_tokens  # type: ignore[union-attr]


async def test_pattern_continuation_streaming(
    local_gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, local_gateway)
    async with openai_client(rollout) as client:
        stream = await client.chat.completions.create(
            model="anything",
            messages=[{"role": "user", "content": "Monday, Tuesday, Wednesday,"}],
            max_tokens=4,
            temperature=0,
            stream=True,
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert "Thursday" in text
    response = (await events(http, local_gateway, rollout["id"]))[1]["payload"]
    assert response["body"]["choices"][0]["message"]["content"] == text
    assert response["usage"]["completion_tokens"] > 0
    assert response["chunks"] >= 2


async def test_anthropic_messages_harness_streams_from_the_chat_only_local_model(
    local_gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, local_gateway)
    async with (
        anthropic.AsyncAnthropic(
            base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
        ) as claude,
        claude.messages.stream(
            model="anything",
            max_tokens=4,
            messages=[{"role": "user", "content": "Monday, Tuesday, Wednesday,"}],
            # this SDK version no longer takes temperature as an argument
            extra_body={"temperature": 0},
        ) as stream,
    ):
        deltas = [text async for text in stream.text_stream]
        message = await stream.get_final_message()
    text = "".join(deltas)
    assert "Thursday" in text
    assert message.stop_reason in ("max_tokens", "end_turn")
    assert message.usage.output_tokens > 0
    request, response = (e["payload"] for e in await events(http, local_gateway, rollout["id"]))
    assert (request["dialect"], request["upstream_dialect"]) == ("messages", "chat")
    assert response["body"]["choices"][0]["message"]["content"] == text
    assert response["usage"]["completion_tokens"] == message.usage.output_tokens
