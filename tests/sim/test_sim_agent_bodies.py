"""What the real CLI agents send (tests/agents/fixtures) is answered, stream and not, with
and without a script: ``system`` entries inside Messages ``messages``, thinking, context
management, effort, cache_control, Responses ``developer`` items, reasoning, include,
store, namespace and web_search tools…"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from rolltap.sim import SimConfig, Simulator
from sim.simkit import read_named_events

FIXTURES = Path(__file__).parent.parent / "agents" / "fixtures"
# The shell tool each agent declares, and the arguments its schema takes.
SHELL = {
    "claude_code": ("Bash", {"command": "echo hi > hello.txt"}),
    "codex": ("exec_command", {"cmd": "echo hi > hello.txt"}),
}


def _posts(agent: str) -> list[dict[str, Any]]:
    recorded = json.loads((FIXTURES / f"{agent}.json").read_text())["requests"]
    posts = [r for r in recorded if r["method"] == "POST" and r["path"].startswith("/v1/")]
    assert posts, f"no POST in {agent}.json"
    return posts


CASES = [(agent, i) for agent in SHELL for i in range(len(_posts(agent)))]


def _headers(recorded: dict[str, str]) -> dict[str, str]:
    """The agent's own headers, less those the client sets for itself and the redacted."""
    skip = {"host", "content-length", "accept-encoding", "connection", "x-api-key",
            "authorization"}  # fmt: skip
    return {k: v for k, v in recorded.items() if k not in skip}


def test_the_fixtures_hold_what_the_simulator_must_take() -> None:
    """The fixtures are the real agents' requests, with the fields this file is about."""
    claude = _posts("claude_code")[0]["body"]
    assert "system" in [m["role"] for m in claude["messages"]]
    assert {"thinking", "context_management", "output_config", "metadata"} <= set(claude)
    assert any("cache_control" in block for block in claude["system"])
    codex = _posts("codex")[0]["body"]
    assert "developer" in [item.get("role") for item in codex["input"]]
    assert {"reasoning", "include", "store", "prompt_cache_key", "client_metadata"} <= set(codex)
    assert {"namespace", "web_search"} <= {tool["type"] for tool in codex["tools"]}


async def _post(
    http: aiohttp.ClientSession, sim: Simulator, recorded: dict[str, Any], stream: bool
) -> tuple[int, bytes]:
    body = {**recorded["body"], "stream": stream}
    headers = {**_headers(recorded["headers"]), "content-type": "application/json"}
    url = sim.url + recorded["path"]
    async with http.post(url, data=orjson.dumps(body), headers=headers) as resp:
        if stream and resp.status == 200:
            events = await read_named_events(resp)
            return resp.status, b"\n".join(data for _, data in events)
        return resp.status, await resp.read()


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize(("agent", "index"), CASES)
async def test_every_recorded_call_is_answered(
    session: aiohttp.ClientSession, agent: str, index: int, stream: bool
) -> None:
    recorded = _posts(agent)[index]
    async with Simulator(SimConfig()) as sim:
        status, answer = await _post(session, sim, recorded, stream)
    assert status == 200, answer[:500]
    first = orjson.loads(answer.split(b"\n")[0])  # the body, or the stream's first event
    started = first.get("message") or first.get("response") or first
    assert started["model"] == recorded["body"]["model"]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize(("agent", "index"), CASES)
async def test_with_a_script_the_answer_is_the_scripted_call(
    session: aiohttp.ClientSession, agent: str, index: int, stream: bool
) -> None:
    recorded = _posts(agent)[index]
    name, arguments = SHELL[agent]
    script = [{"tool_call": {"name": name, "arguments": arguments}}, {"text": "done"}]
    async with Simulator(SimConfig(script=script)) as sim:
        status, answer = await _post(session, sim, recorded, stream)
        assert sim.stats.script_turns == {"": 1}
    assert status == 200, answer[:500]
    calls = _calls(answer, stream)
    assert calls == [(name, arguments)]


def _calls(answer: bytes, stream: bool) -> list[tuple[str, Any]]:
    """The tool calls of a Messages or Responses answer (the final message or response)."""
    if stream:
        events = [orjson.loads(line) for line in answer.split(b"\n")]
        done = [e for e in events if e["type"] in ("response.completed", "content_block_start")]
        if done[-1]["type"] == "response.completed":
            return _calls(orjson.dumps(done[-1]["response"]), False)
        joined = "".join(e["delta"]["partial_json"] for e in events
                         if e.get("delta", {}).get("type") == "input_json_delta")  # fmt: skip
        names = [e["content_block"]["name"] for e in done
                 if e["content_block"]["type"] == "tool_use"]  # fmt: skip
        return [(names[0], orjson.loads(joined))] if names else []
    body = orjson.loads(answer)
    if body.get("type") == "message":
        return [(b["name"], b["input"]) for b in body["content"] if b["type"] == "tool_use"]
    return [(i["name"], orjson.loads(i["arguments"])) for i in body["output"]
            if i["type"] == "function_call"]  # fmt: skip


async def test_claude_codes_probe_of_the_bare_url_is_answered(
    session: aiohttp.ClientSession,
) -> None:
    probes = [r for r in json.loads((FIXTURES / "claude_code.json").read_text())["requests"]
              if r["method"] != "POST"]  # fmt: skip
    assert probes
    async with Simulator(SimConfig()) as sim:
        for probe in probes:
            async with session.request(probe["method"], sim.url + probe["path"]) as resp:
                assert resp.status == 200
