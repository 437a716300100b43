"""Translation at the edges: upstream errors in the harness's dialect, keepalives,
count_tokens, and fields an upstream dialect cannot express."""

from __future__ import annotations

from typing import Any, Literal

import aiohttp
import anthropic
import openai
import pytest

from helpers import ADMIN_TOKEN, GatewayFactory, events, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.config.endpoint import Dialect
from rolltap.gateway import Gateway
from rolltap.gateway.harness import ESTIMATE_HEADER
from rolltap.sim import Simulator

DIALECTS: list[Dialect] = ["chat", "messages", "responses"]
FAULT = {"x-sim-fault": "status=429"}


async def _call(harness: str, rollout: dict[str, Any], headers: dict[str, str]) -> None:
    key = rollout["api_key"]
    if harness == "messages":
        async with anthropic.AsyncAnthropic(
            base_url=rollout["anthropic_base_url"], api_key=key, max_retries=0
        ) as claude:
            await claude.messages.create(
                model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}],
                extra_headers=headers,
            )  # fmt: skip
        return
    async with openai.AsyncOpenAI(
        base_url=rollout["openai_base_url"], api_key=key, max_retries=0
    ) as client:
        if harness == "chat":
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
            )
        else:
            await client.responses.create(model="m", input="hi", extra_headers=headers)


@pytest.mark.parametrize("harness", DIALECTS)
@pytest.mark.parametrize("upstream", DIALECTS)
async def test_upstream_errors_arrive_in_the_harness_dialect(
    harness: str, upstream: Dialect, make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(dialect=upstream)
    rollout = await register(http, gateway)
    with pytest.raises((anthropic.RateLimitError, openai.RateLimitError)) as info:
        await _call(harness, rollout, FAULT)
    sdk = anthropic if harness == "messages" else openai
    assert isinstance(info.value, sdk.RateLimitError)
    body: Any = info.value.body
    # the SDKs hand over the body's error object (Anthropic: the whole body)
    detail = body.get("error", body)
    assert detail["code"] == "upstream_http_error"
    if harness == "messages":
        assert body["type"] == "error"
        assert detail["type"] == "rate_limit_error"
    evs = await events(http, gateway, rollout["id"])
    assert evs[-1]["kind"] == "model_error"
    assert evs[-1]["payload"]["code"] == "upstream_http_error"


@pytest.mark.parametrize("harness", DIALECTS)
async def test_request_errors_before_any_call_use_the_route_dialect(
    harness: str, gateway: Any, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    route = {"chat": "chat/completions", "messages": "messages", "responses": "responses"}
    url = f"{rollout['openai_base_url']}/{route[harness]}"
    async with http.post(url, data=b"{not json", headers={"x-api-key": rollout["api_key"]}) as r:
        assert r.status == 400
        body = await r.json()
    if harness == "messages":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "malformed_json"


@pytest.mark.parametrize(
    ("harness", "frame"),
    [("chat", b": keepalive"), ("messages", b"event: ping"), ("responses", b": keepalive")],
)
async def test_a_silent_upstream_gets_the_harness_dialect_keepalive(
    harness: str, frame: bytes, sim: Simulator, make_gateway: GatewayFactory,
    http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    gateway = await make_gateway(keepalive_s=0.01)
    rollout = await register(http, gateway)
    gate = sim.gate(f"keepalive-{harness}")
    body: dict[str, Any] = {"model": "m", "stream": True}
    if harness == "responses":
        body |= {"input": "hi", "max_output_tokens": 8}
    else:
        body |= {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    route = {"chat": "chat/completions", "messages": "messages", "responses": "responses"}
    headers = {"Authorization": f"Bearer {rollout['api_key']}", "x-sim-gate": gate.name}
    url = f"{rollout['openai_base_url']}/{route[harness]}"
    async with http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 200
        seen = b""
        await gate.wait_reached()
        # the upstream holds the stream after its first event: keepalives flow meanwhile
        while frame not in seen:
            seen += await resp.content.readany()
        gate.open()
        seen += await resp.read()
    assert seen.count(frame) >= 1
    (response,) = [
        e for e in await events(http, gateway, rollout["id"]) if e["kind"] != "model_request"
    ]
    assert response["kind"] == "model_response"


@pytest.mark.parametrize("upstream", DIALECTS)
async def test_count_tokens_counted_upstream_or_estimated(
    upstream: Dialect, make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(dialect=upstream)
    rollout = await register(http, gateway)
    async with anthropic.AsyncAnthropic(
        base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
    ) as claude:
        raw = await claude.messages.with_raw_response.count_tokens(
            model="m", messages=[{"role": "user", "content": "how many tokens is this"}]
        )
    count = await raw.parse()
    assert count.input_tokens > 0
    estimated = raw.headers.get(ESTIMATE_HEADER) == "estimate"
    assert estimated is (upstream != "messages")


@pytest.mark.parametrize("unsupported", ["refuse", "drop"])
async def test_a_field_the_upstream_cannot_express_is_refused_or_dropped(
    unsupported: Literal["drop", "refuse"], http: aiohttp.ClientSession, sim: Simulator
) -> None:
    endpoint = EndpointConfig(
        base_url=sim.base_url, model="sim-model", dialect="responses", unsupported=unsupported
    )
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        rollout = await register(http, gateway)
        async with openai.AsyncOpenAI(
            base_url=rollout["openai_base_url"], api_key=rollout["api_key"], max_retries=0
        ) as client:
            create = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stop=["END"]
            )
            if unsupported == "refuse":  # a strict evaluation: a 400 naming the field
                with pytest.raises(openai.BadRequestError) as info:
                    await create
                assert info.value.param == "stop"
                assert sim.stats.requests == 0
                return
            await create  # the default: sent without it, and the request event says so
        request = (await events(http, gateway, rollout["id"]))[0]["payload"]
    assert sim.stats.requests == 1
    assert {"dropped": "stop", "reason": "Responses has no stop sequences"} in request["rewrites"]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
async def test_upstream_logprobs_are_recorded_for_an_anthropic_harness(
    stream: bool, gateway: Any, http: aiohttp.ClientSession
) -> None:
    # the run's sampling asks the chat upstream for logprobs: Anthropic has no such field
    rollout = await register(http, gateway, sampling={"logprobs": True})
    async with anthropic.AsyncAnthropic(
        base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
    ) as claude:
        request: dict[str, Any] = {
            "model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}],
        }  # fmt: skip
        if stream:
            async with claude.messages.stream(**request) as s:
                message = await s.get_final_message()
        else:
            message = await claude.messages.create(**request)
    text = "".join(b.text for b in message.content if b.type == "text")
    response = (await events(http, gateway, rollout["id"]))[1]["payload"]
    recorded = (
        response["extras"]["logprobs"] if stream
        else response["body"]["choices"][0]["logprobs"]["content"]
    )  # fmt: skip
    assert "".join(entry["token"] for entry in recorded) == text
    assert all(isinstance(entry["logprob"], float) for entry in recorded)
