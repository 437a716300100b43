"""The token client's llama.cpp backend against the real llama-server (Gemma 3 270M): an
answer that ends on a stop word is recorded with one logprob per sampled id.

llama-server drops the probabilities of a stop word's tokens from a whole answer; the
token client streams a request with stop strings, whose events carry every token's
probability. The streamed values are the ones a whole answer reports for the same ids."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from helpers import ADMIN_TOKEN, events, openai_client, register, require_local_extra
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.local import LocalModel

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]

#: stops the 270M model's answer reaches within a few tokens (space, newline, a vowel)
_STOPS = [" ", "\n", "e", "."]


@pytest.fixture
async def local_model() -> AsyncIterator[LocalModel]:
    require_local_extra()
    async with LocalModel(ctx_size=4096, parallel=1) as model:
        yield model


@pytest.fixture
async def token_gateway(local_model: LocalModel) -> AsyncIterator[Gateway]:
    from rolltap.local.model import gguf_path
    from rolltap.tokens.gguf import load_gguf_tokenizer

    tokenizer = str(await asyncio.to_thread(load_gguf_tokenizer, gguf_path()))
    endpoint = EndpointConfig(
        name="local", base_url=local_model.base_url, model=local_model.model, client="tokens",
        tokenizer=tokenizer, completions_api="llamacpp",
    )  # fmt: skip
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        yield gateway


async def _whole_answer(
    http: aiohttp.ClientSession, model: LocalModel, prompt_ids: list[int]
) -> dict[str, Any]:
    """The same request as a whole answer, straight to llama-server."""
    body = {"prompt": prompt_ids, "n_predict": 16, "n_probs": 1, "return_tokens": True,
            "stop": _STOPS, "temperature": 0}  # fmt: skip
    root = model.base_url.removesuffix("/").removesuffix("/v1")
    async with http.post(f"{root}/completion", json=body) as resp:
        assert resp.status == 200
        answer: dict[str, Any] = await resp.json()
    return answer


async def test_a_stop_word_answer_has_a_logprob_per_id(
    token_gateway: Gateway, local_model: LocalModel, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, token_gateway)
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="anything", messages=[{"role": "user", "content": "Name a color."}],
            max_tokens=16, temperature=0, stop=_STOPS,
        )  # fmt: skip
    assert reply.choices[0].finish_reason == "stop"
    response = (await events(http, token_gateway, rollout["id"]))[-1]["payload"]
    assert response["body"]["stop_type"] == "word"
    tokens = response["tokens"]
    ids, logprobs = tokens["completion_ids"], tokens["completion_logprobs"]
    assert ids and len(logprobs) == len(ids)
    assert all(isinstance(lp, float) and lp <= 0 for lp in logprobs)
    # a whole answer samples the same ids (temperature 0) but reports fewer logprobs:
    # those it reports are the streamed values, bit for bit
    whole = await _whole_answer(http, local_model, tokens["prompt_ids"])
    assert whole["tokens"] == ids and whole["stop_type"] == "word"
    reported = [p["logprob"] for p in whole.get("completion_probabilities") or []]
    assert len(reported) < len(ids)
    assert reported == logprobs[: len(reported)]
