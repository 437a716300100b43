"""Real agents' calls through a translating gateway (issue 30): Claude Code's and Codex's
captured requests, posted as they sent them (raw HTTP, their headers) or through the
official SDKs, to an upstream of another dialect (``rolltap.sim``): answered 200 under the
default ``unsupported = "drop"``, every dropped field and vendor header in the request
event's ``rewrites``; under ``"refuse"``, a 400 naming the first inexpressible field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import aiohttp
import anthropic
import openai
import orjson
import pytest

from dialects.agentkit import PAIRS, Captured, captured
from helpers import ADMIN_TOKEN, events, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator
from upstreams import recording

#: what each captured call loses on the way to another dialect (tests/dialects has why)
DROPPED = {
    "claude_code": {"context_management", "system[].cache_control",
                    "messages[].parts[].cache_control", "header:anthropic-beta",
                    "header:anthropic-version",
                    "header:anthropic-dangerous-direct-browser-access"},
    "codex": {"reasoning.summary", "store", "include", "prompt_cache_key", "client_metadata",
              "messages[].id", "tools[type=namespace]", "tools[type=web_search]"},
}  # fmt: skip
#: harness headers the gateway never forwards as they came (it sets its own)
_OWN_HEADERS = {"host", "content-length", "authorization", "x-api-key", "accept-encoding",
                "connection"}  # fmt: skip


@pytest.fixture
async def sim() -> AsyncIterator[Simulator]:
    """A simulator whose chat answers open with reasoning, as a reasoning model's do."""
    async with Simulator(SimConfig(seed=7, reasoning_tokens=4)) as simulator:
        yield simulator


@asynccontextmanager
async def _gateway(
    base_url: str, dialect: str, unsupported: Literal["drop", "refuse"] = "drop"
) -> AsyncIterator[Gateway]:
    fields = {"base_url": base_url, "model": "sim-model", "dialect": dialect}
    endpoint = EndpointConfig.model_validate({**fields, "unsupported": unsupported})
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        yield gateway


async def _post(
    http: aiohttp.ClientSession, rollout: dict[str, Any], call: Captured
) -> tuple[int, bytes]:
    """``call`` as the agent sent it: its path (Claude Code's ``?beta=true`` included),
    its headers (but its key: the rollout's), its body."""
    headers = {k: v for k, v in call.headers.items() if k not in _OWN_HEADERS}
    headers["authorization"] = f"Bearer {rollout['api_key']}"
    url = rollout["openai_base_url"].removesuffix("/v1") + call.path
    async with http.post(url, data=orjson.dumps(call.body), headers=headers) as resp:
        return resp.status, await resp.read()


def _sse(raw: bytes) -> list[dict[str, Any]]:
    frames = [f for f in raw.decode().split("\n\n") if f.strip()]
    data = [line[6:] for f in frames for line in f.splitlines() if line.startswith("data: ")]
    return [orjson.loads(d) for d in data if d != "[DONE]"]


def _answer_kinds(agent: str, stream: list[dict[str, Any]]) -> tuple[str, set[str]]:
    """The stream's last event type, and the kinds of content it carried."""
    if agent == "claude_code":
        kinds = {e["content_block"]["type"] for e in stream if e["type"] == "content_block_start"}
    else:
        done = [e for e in stream if e["type"] == "response.output_item.done"]
        kinds = {e["item"]["type"] for e in done}
    return stream[-1]["type"], kinds


@pytest.mark.parametrize(("agent", "upstream"), PAIRS)
async def test_a_captured_call_is_answered_and_its_drops_recorded(
    agent: str, upstream: str, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    call = captured(agent)
    async with _gateway(sim.base_url, upstream) as gateway:
        rollout = await register(http, gateway)
        status, raw = await _post(http, rollout, call)
        assert status == 200, raw[:500]
        request, response = (await events(http, gateway, rollout["id"]))[:2]
    dropped = {r["dropped"] for r in request["payload"]["rewrites"] if "dropped" in r}
    assert dropped == DROPPED[agent]  # Codex sends no OpenAI vendor header to drop
    assert response["kind"] == "model_response" and response["payload"]["status"] == 200
    last, kinds = _answer_kinds(agent, _sse(raw))
    assert last == ("message_stop" if agent == "claude_code" else "response.completed")
    # the upstream's tool call (and, from a chat upstream, its reasoning) reach the agent
    call_kind = "tool_use" if agent == "claude_code" else "function_call"
    thought = "thinking" if agent == "claude_code" else "reasoning"
    assert call_kind in kinds
    if upstream == "chat":
        assert thought in kinds


async def test_refuse_names_the_first_field_and_sends_nothing(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    async with _gateway(sim.base_url, "chat", "refuse") as gateway:
        rollout = await register(http, gateway)
        status, raw = await _post(http, rollout, captured("codex"))
        assert status == 400
        error = orjson.loads(raw)["error"]
        assert error["param"] == "tools[type=namespace]"
        assert sim.stats.requests == 0
        # Claude Code's call has nothing chat cannot express: strict, and still answered
        status, raw = await _post(http, rollout, captured("claude_code"))
        assert status == 200, raw[:500]
    assert sim.stats.requests == 1


async def test_the_upstream_gets_the_tables_body_and_no_vendor_header(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    call = captured("claude_code")
    async with recording(sim.url) as (url, recorder), _gateway(url + "/v1", "chat") as gateway:
        rollout = await register(http, gateway)
        status, raw = await _post(http, rollout, call)
        assert status == 200, raw[:500]
    ((headers, body),) = [(r["headers"], r["body"]) for r in recorder.requests]
    assert not [h for h in headers if h.startswith("anthropic-")]
    assert headers["x-claude-code-session-id"] == call.headers["x-claude-code-session-id"]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "system"]
    assert (body["reasoning_effort"], body["model"]) == ("high", "sim-model")
    assert b"cache_control" not in orjson.dumps(body)


async def test_the_official_sdks_send_the_agents_calls(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    claude, codex = captured("claude_code").fresh(), captured("codex").fresh()
    async with _gateway(sim.base_url, "chat") as gateway:
        rollout = await register(http, gateway)
        async with anthropic.AsyncAnthropic(
            base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
        ) as client:
            extra = {k: claude.pop(k) for k in ("context_management", "output_config")}
            del claude["stream"]  # the helper streams
            sdk: Any = client.messages  # the SDK's types know no system entries yet
            async with sdk.stream(**claude, extra_body=extra) as stream:
                message = await stream.get_final_message()
        assert {b.type for b in message.content} >= {"thinking", "tool_use"}
        async with openai.AsyncOpenAI(
            base_url=rollout["openai_base_url"], api_key=rollout["api_key"], max_retries=0
        ) as oai:
            extra = {"client_metadata": codex.pop("client_metadata")}
            responses: Any = oai.responses  # nor a namespace tool
            stream = await responses.create(**codex, extra_body=extra)
            done = [event async for event in stream][-1]
        assert done.type == "response.completed"
        assert {item.type for item in done.response.output} >= {"reasoning", "function_call"}
        recorded = await events(http, gateway, rollout["id"])
    requests = [e["payload"] for e in recorded if e["kind"] == "model_request"]
    assert [r["dialect"] for r in requests] == ["messages", "responses"]
    for payload, agent in zip(requests, ("claude_code", "codex"), strict=True):
        fields = {r["dropped"] for r in payload["rewrites"] if "dropped" in r}
        assert {f for f in DROPPED[agent] if not f.startswith("header:")} <= fields
