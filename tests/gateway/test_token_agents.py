"""Real agents' calls through the token client (``--client tokens``, the RL path): Claude
Code's and Codex's captured requests render through the model's chat template, what chat
cannot express dropped and recorded by the translation table, and the answer goes back in
the agent's dialect, streamed as it asked, with the turn's token record complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simtok import build_sim_tokenizer
from helpers import ADMIN_TOKEN, events, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import Simulator

FIXTURES = Path(__file__).parent.parent / "agents" / "fixtures"
#: what each agent's request keeps of its headers (no credentials, no framing)
_KEEP = ("anthropic-beta", "anthropic-version", "x-claude-code-session-id", "session-id",
         "originator", "user-agent")  # fmt: skip


def _captured(agent: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The agent's model call: its path, body and headers."""
    requests = json.loads((FIXTURES / f"{agent}.json").read_text())["requests"]
    call = next(r for r in requests if r["method"] == "POST")
    headers = {k: v for k, v in call["headers"].items() if k in _KEEP}
    return call["path"].removeprefix("/v1").split("?")[0], call["body"], headers


def _sse_events(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]


async def _gateway(sim: Simulator, tokenizer: Path, **endpoint: Any) -> Gateway:
    config = EndpointConfig(
        base_url=sim.base_url, model="sim-model", client="tokens", tokenizer=str(tokenizer),
        completions_api="vllm", **endpoint,
    )  # fmt: skip
    gateway = Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN))
    await gateway.start()
    return gateway


@pytest.mark.parametrize(
    ("agent", "last", "dropped"),
    [
        ("claude_code", "message_stop", {"context_management", "reasoning_effort"}),
        ("codex", "response.completed", {"include", "store", "reasoning.summary"}),
    ],
)
async def test_an_agent_call_through_the_token_client(
    agent: str, last: str, dropped: set[str], sim: Simulator, tmp_path: Path,
    http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    path, body, headers = _captured(agent)
    gateway = await _gateway(sim, build_sim_tokenizer(tmp_path / "tok"))
    try:
        rollout = await register(http, gateway)
        url = rollout["base_url"] + path
        auth = {"Authorization": f"Bearer {rollout['api_key']}", **headers}
        async with http.post(url, json=body, headers=auth) as resp:
            raw = await resp.read()
            assert resp.status == 200, raw[:500]
            assert resp.content_type == "text/event-stream"
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    frames = _sse_events(raw)
    assert frames[-1]["type"] == last  # the agent's own dialect, streamed to its end
    request = next(e["payload"] for e in evs if e["kind"] == "model_request")
    recorded = {r["dropped"] for r in request["rewrites"] if "dropped" in r}
    assert dropped <= recorded, recorded
    tokens = next(e["payload"] for e in evs if e["kind"] == "model_response")["tokens"]
    assert tokens["prompt_ids"] and tokens["completion_ids"]
    assert len(tokens["completion_logprobs"]) == len(tokens["completion_ids"])
    assert not any(e["kind"] == "model_error" for e in evs)


async def test_refuse_keeps_a_hosted_tool_a_400_on_the_token_client(
    sim: Simulator, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    path, body, headers = _captured("codex")
    gateway = await _gateway(sim, build_sim_tokenizer(tmp_path / "tok"), unsupported="refuse")
    try:
        rollout = await register(http, gateway)
        auth = {"Authorization": f"Bearer {rollout['api_key']}", **headers}
        async with http.post(rollout["base_url"] + path, json=body, headers=auth) as resp:
            error = (await resp.json())["error"]
            assert resp.status == 400
        evs = await events(http, gateway, rollout["id"])
    finally:
        await gateway.aclose()
    assert error["code"] == "invalid_request" and error["param"]
    assert [e["kind"] for e in evs] == ["model_request", "model_error"]
