"""``rolltap sessions show``: tool calls, results, reasoning and errors on screen.

Real sessions: the official SDKs (the drivers) through the gateway to the simulator —
or, for reasoning, which the simulator never produces, to an upstream that streams a
provider's wire format field for field — persisted by the gateway's store recorder.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web

from dialects.streams.streamkit import SCENARIOS, upstream
from gateway.dialect_drivers import Driver, driver
from helpers import ADMIN_TOKEN, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.config.endpoint import Dialect
from rolltap.exports.transcript import build_transcript
from rolltap.exports.transcript_text import render_lines
from rolltap.gateway import Gateway
from rolltap.rollouts import Task
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store
from runkit import evaluate
from upstreams import serving

DIALECTS: list[Dialect] = ["chat", "messages", "responses"]
RESULT = "sum is 5 (from the add tool)"


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'transcripts.db'}"


@asynccontextmanager
async def _session(
    tmp_path: Path, http: aiohttp.ClientSession, base_url: str, upstream_dialect: Dialect,
    harness: str,
) -> AsyncIterator[tuple[Driver, str]]:  # fmt: skip
    """A driver on a rollout (and its id) whose events the gateway's recorder stores."""
    endpoint = EndpointConfig(base_url=base_url, model="sim-model", dialect=upstream_dialect)
    async with await Store.open(_url(tmp_path)) as store:
        run = await store.create_run("transcripts")
        async with (
            StoreRecorder(store, run.id) as recorder,
            Gateway(
                endpoint, GatewaySettings(admin_token=ADMIN_TOKEN), observers=[recorder]
            ) as gateway,  # fmt: skip
        ):
            rollout = await register(http, gateway)
            async with driver(harness, openai_base_url=rollout["openai_base_url"],
                              anthropic_base_url=rollout["anthropic_base_url"],
                              api_key=rollout["api_key"]) as client:  # fmt: skip
                yield client, rollout["id"]
            await gateway.unregister(rollout["id"])
        # the recorder is closed: the rollout's final commit is in


async def _rendered(tmp_path: Path, session_id: str) -> list[str]:
    async with await Store.open(_url(tmp_path)) as store:
        return render_lines(build_transcript(await store.events(session_id)))


def _tool_lines(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if f"tool call {name}(" in line]


def _arguments(line: str, name: str) -> object:
    start = line.index(f"tool call {name}(") + len(f"tool call {name}(")
    return json.loads(line[start : line.rindex(") [")])


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("upstream_dialect", DIALECTS)
@pytest.mark.parametrize("harness", DIALECTS)
async def test_tool_loop_shows_calls_arguments_and_results(
    harness: str, upstream_dialect: Dialect, stream: bool, sim: Simulator,
    http: aiohttp.ClientSession, tmp_path: Path,
) -> None:  # fmt: skip
    async with _session(tmp_path, http, sim.base_url, upstream_dialect, harness) as (c, sid):
        convo = c.start("add 2 and 3")
        call = await c.turn(convo, tools=True, stream=stream)
        assert call.calls, "the simulator calls the tool when offered one"
        c.add_results(convo, call, RESULT)
        answer = await c.turn(convo, tools=True, stream=stream)
    lines = await _rendered(tmp_path, sid)
    text = "\n".join(lines)
    assert "user: add 2 and 3" in text
    (call_line,) = _tool_lines(lines, "add")  # the harness's echo of it is not repeated
    assert _arguments(call_line, "add") == json.loads(call.calls[0][2])
    assert f"tool result add [{call.calls[0][0]}]: {RESULT}" in text
    assert f"assistant: {answer.text}" in text
    assert text.index("tool call add(") < text.index("tool result add") < text.rindex("← 200")
    assert "→ call 2" in text and "in / " in text  # per call: its usage


@asynccontextmanager
async def _scripted_upstream(dialect: Dialect, scenario: str) -> AsyncIterator[str]:
    """An upstream that streams ``scenario`` exactly as ``dialect``'s servers do."""
    wire = upstream(dialect, next(s for s in SCENARIOS if s.name == scenario))

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=wire, content_type="text/event-stream")

    app = web.Application()
    for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses"):
        app.router.add_post(path, answer)
    async with serving(app) as url:
        yield url + "/v1"


@pytest.mark.parametrize("upstream_dialect", DIALECTS)
@pytest.mark.parametrize("harness", DIALECTS)
async def test_reasoning_and_streamed_tool_calls_are_shown(
    harness: str, upstream_dialect: Dialect, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with (
        _scripted_upstream(upstream_dialect, "reasoning") as base_url,
        _session(tmp_path, http, base_url, upstream_dialect, harness) as (client, sid),
    ):
        turn = await client.turn(client.start("what is 2+2?"), tools=False, stream=True)
    lines = await _rendered(tmp_path, sid)
    assert turn.text == "The answer is 4."
    text = "\n".join(lines)
    assert "reasoning: Let me think about 2+2." in text
    assert text.index("reasoning: Let me think") < text.index("assistant: The answer is 4.")
    assert "← 200 stop · 20 in / 31 out tok" in text


@pytest.mark.parametrize("harness", DIALECTS)
async def test_errors_show_code_and_message(
    harness: str, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with Simulator(SimConfig(faults=("status=503",))) as failing:
        for base_url in ("http://127.0.0.1:1/v1", failing.base_url):
            async with _session(tmp_path, http, base_url, "chat", harness) as (c, sid):
                with pytest.raises((openai.APIError, anthropic.APIError)):
                    await c.turn(c.start("anyone there?"), tools=False, stream=False)
            (error,) = [line for line in await _rendered(tmp_path, sid) if "✗" in line]
            if base_url == failing.base_url:
                assert "✗ 503 upstream_http_error: upstream answered HTTP 503" in error
            else:
                assert "✗ 502 upstream_unreachable: cannot connect to upstream" in error


CLI = "from rolltap.cli.main import main; main()"


async def test_sessions_show_prints_the_tool_agent_transcript(
    sim: Simulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with _session(tmp_path, http, sim.base_url, "chat", "chat") as (client, session_id):
        convo = client.start("add 2 and 3")
        call = await client.turn(convo, tools=True, stream=False)
        client.add_results(convo, call, RESULT)
        await client.turn(convo, tools=True, stream=True)
    lines = await _rendered(tmp_path, session_id)
    # the child imports the very rolltap this test does
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "sessions", "show", session_id[:8], "--store", _url(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    shown = out.decode()
    assert f"session {session_id}" in shown
    for line in lines:  # the library's rendering, unwrapped, whatever the terminal width
        assert line.strip() in shown
    assert f"tool result add [{call.calls[0][0]}]: {RESULT}" in shown


@pytest.mark.parametrize("harness", ["tool-agent", "messages-tool-agent"])
async def test_built_in_tool_agents_transcripts(
    harness: str, sim: Simulator, tmp_path: Path
) -> None:
    url = _url(tmp_path)
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", dialect="chat")
    task = Task(id="t", prompt="what is 6*7?", info={"regex": "."})
    result = await evaluate([task], harness=harness, endpoint=endpoint, store=url,
                            rewards=["regex"])  # fmt: skip
    lines = await _rendered(tmp_path, result.results[0].session_id or "")
    text = "\n".join(lines)
    # the simulator asks for expression "x", which the calculator refuses; the agent's
    # echo of the call (as Anthropic blocks for messages-tool-agent) is not repeated
    (call_line,) = _tool_lines(lines, "calculator")
    assert _arguments(call_line, "calculator") == {"expression": "x"}
    assert "tool result calculator [" in text
    assert "]: error: unsupported expression: Name" in text
    assert "reward 1.0" in text
