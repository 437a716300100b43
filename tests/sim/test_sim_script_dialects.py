"""Scripted turns served in every dialect, stream and not, through the official SDKs and
on the raw wire: text, tool calls (several in one turn), ids, stop reasons, sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest

from rolltap.sim import SimConfig, Simulator
from rolltap.sim.words import WORDS
from sim.simkit import chat_body, messages_body, read_named_events, responses_body

DIALECTS = ("chat", "messages", "responses")
BASH = {"name": "Bash", "arguments": {"command": "echo hi > hello.txt"}}
READ = {"name": "Read", "arguments": {"file_path": "/tmp/a b.txt", "limit": 3}}
SCRIPT: dict[str, Any] = {
    "default": [
        {"text": "Let me look.", "tool_calls": [BASH, READ]},
        {"tool_call": BASH},
        {"text": "All done, two calls made."},
    ]
}
_PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
_BODIES = {"chat": chat_body, "messages": messages_body, "responses": responses_body}


@dataclass(frozen=True)
class Said:
    """One answer, whatever its dialect: text, calls as (id, name, arguments) and stop."""

    text: str
    calls: list[tuple[str, str, Any]]
    stop: str


@dataclass
class Clients:
    sim: Simulator
    chat: openai.AsyncOpenAI
    claude: anthropic.AsyncAnthropic

    async def say(self, dialect: str, stream: bool, headers: dict[str, str] | None = None) -> Said:
        """One call in ``dialect`` through its SDK (``stream``: its stream helper)."""
        extra = headers or {}
        if dialect == "chat":
            return await self._chat(stream, extra)
        if dialect == "messages":
            return await self._messages(stream, extra)
        return await self._responses(stream, extra)

    async def _chat(self, stream: bool, headers: dict[str, str]) -> Said:
        body: Any = {"model": "m", "messages": [{"role": "user", "content": "go"}],
                     "extra_headers": headers}  # fmt: skip
        if stream:
            async with self.chat.chat.completions.stream(**body) as events:
                done = await events.get_final_completion()
        else:
            done = await self.chat.chat.completions.create(**body)
        choice = done.choices[0]
        calls = [(c.id, c.function.name, orjson.loads(c.function.arguments))
                 for c in choice.message.tool_calls or [] if c.type == "function"]  # fmt: skip
        return Said(choice.message.content or "", calls, choice.finish_reason)

    async def _messages(self, stream: bool, headers: dict[str, str]) -> Said:
        body: Any = {"model": "m", "max_tokens": 50, "extra_headers": headers,
                     "messages": [{"role": "user", "content": "go"}]}  # fmt: skip
        if stream:
            async with self.claude.messages.stream(**body) as events:
                done = await events.get_final_message()
        else:
            done = await self.claude.messages.create(**body)
        text = "".join(b.text for b in done.content if b.type == "text")
        calls = [(b.id, b.name, b.input) for b in done.content if b.type == "tool_use"]
        assert done.stop_reason is not None
        return Said(text, calls, done.stop_reason)

    async def _responses(self, stream: bool, headers: dict[str, str]) -> Said:
        body: Any = {"model": "m", "input": "go", "extra_headers": headers}
        if stream:
            async with self.chat.responses.stream(**body) as events:
                done = await events.get_final_response()
        else:
            done = await self.chat.responses.create(**body)
        calls = [(i.call_id, i.name, orjson.loads(i.arguments))
                 for i in done.output if i.type == "function_call"]  # fmt: skip
        kinds = [item.type for item in done.output]
        assert kinds == sorted(kinds, key=lambda k: k != "message")  # the text item first
        assert done.status is not None
        return Said(done.output_text, calls, done.status)


async def _clients(config: SimConfig) -> AsyncIterator[Clients]:
    async with (
        Simulator(config) as sim,
        openai.AsyncOpenAI(base_url=sim.base_url, api_key="k", max_retries=0) as chat,
        anthropic.AsyncAnthropic(base_url=sim.url, api_key="k", max_retries=0) as claude,
    ):
        yield Clients(sim, chat, claude)


@pytest.fixture
async def scripted() -> AsyncIterator[Clients]:
    async for clients in _clients(SimConfig(script=SCRIPT)):
        yield clients


_STOPS = {  # (after a turn with calls, after text alone)
    "chat": ("tool_calls", "stop"),
    "messages": ("tool_use", "end_turn"),
    "responses": ("completed", "completed"),
}
_ID_PREFIX = {"chat": "call_sim_", "messages": "toolu_sim_", "responses": "call_sim_"}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_the_turns_in_order_then_done(scripted: Clients, dialect: str, stream: bool) -> None:
    said = [await scripted.say(dialect, stream) for _ in range(4)]
    calls, text_stop = _STOPS[dialect]
    assert said[0].text == "Let me look."
    assert [(name, args) for _, name, args in said[0].calls] == [
        ("Bash", BASH["arguments"]), ("Read", READ["arguments"])]  # fmt: skip
    assert said[0].stop == calls
    assert (said[1].text, [c[1:] for c in said[1].calls]) == ("", [("Bash", BASH["arguments"])])
    assert said[1].stop == calls
    assert said[2] == Said("All done, two calls made.", [], text_stop)
    assert said[3] == Said("done", [], text_stop)  # past the end
    ids = [call[0] for turn in said for call in turn.calls]
    assert len(set(ids)) == 3
    assert all(i.startswith(_ID_PREFIX[dialect]) for i in ids)
    assert scripted.sim.stats.script_turns == {"": 4}


Pieces = dict[int, list[str]]


def _arguments_of(dialect: str, events: list[tuple[str, bytes]]) -> tuple[Pieces, Any]:
    """The streamed argument pieces per call index, and the stop the stream ended on."""
    parts: Pieces = {}
    stop: Any = None
    for _, data in events:
        if data == b"[DONE]":
            continue
        event = orjson.loads(data)
        if dialect == "chat":
            delta = event["choices"][0]["delta"]
            for call in delta.get("tool_calls", []):
                parts.setdefault(call["index"], []).append(call["function"]["arguments"])
            stop = event["choices"][0]["finish_reason"] or stop
        elif dialect == "messages":
            delta = event.get("delta", {})
            if delta.get("type") == "input_json_delta":
                parts.setdefault(event["index"], []).append(delta["partial_json"])
            stop = delta.get("stop_reason") or stop
        elif event["type"] == "response.function_call_arguments.delta":
            parts.setdefault(event["output_index"], []).append(event["delta"])
        elif event["type"] == "response.completed":
            stop = [item["type"] for item in event["response"]["output"]]
    return parts, stop


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_streamed_arguments_are_framed_per_call(
    scripted: Clients, session: aiohttp.ClientSession, dialect: str
) -> None:
    url = scripted.sim.url + _PATHS[dialect]
    async with session.post(url, json=_BODIES[dialect](stream=True)) as resp:
        assert resp.status == 200
        events = await read_named_events(resp)
    parts, stop = _arguments_of(dialect, events)
    # chat indexes calls 0, 1; Messages' blocks and Responses' items follow the text's 0
    first = 0 if dialect == "chat" else 1
    assert {i: orjson.loads("".join(pieces)) for i, pieces in parts.items()} == {
        first: BASH["arguments"], first + 1: READ["arguments"]}  # fmt: skip
    assert all(len([p for p in pieces if p]) > 1 for pieces in parts.values())  # in pieces
    expected = {"chat": "tool_calls", "messages": "tool_use",
                "responses": ["message", "function_call", "function_call"]}  # fmt: skip
    assert stop == expected[dialect]
    if dialect == "responses":
        names = [name for name, _ in events]
        assert names.count("response.function_call_arguments.done") == 2
        assert names.count("response.output_item.added") == 3


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_sessions_by_rollout_then_session_header(dialect: str) -> None:
    script = {"default": [{"text": "D"}], "sessions": {"a": [{"text": "A"}], "b": [{"text": "B"}]}}
    async for clients in _clients(SimConfig(script=script)):
        both = {"X-Rolltap-Rollout": "a", "X-Session-ID": "b"}
        assert (await clients.say(dialect, False, both)).text == "A"
        assert (await clients.say(dialect, False, {"X-Session-ID": "b"})).text == "B"
        assert (await clients.say(dialect, False, {"X-Session-ID": "c"})).text == "D"
        assert (await clients.say(dialect, False)).text == "D"
        # each session counts its own calls: all are past their one turn now
        for headers in ({"X-Rolltap-Rollout": "a"}, {"X-Session-ID": "c"}, {}):
            assert (await clients.say(dialect, False, headers)).text == "done"
        assert (await clients.say(dialect, False, {"X-Rolltap-Rollout": "z"})).text == "D"
        assert clients.sim.stats.script_turns == {"a": 2, "b": 1, "c": 2, "": 2, "z": 1}


async def test_a_session_without_script_or_default_gets_generated_answers() -> None:
    async for clients in _clients(SimConfig(script={"sessions": {"a": [{"text": "A"}]}})):
        generated = await clients.say("chat", False, {"X-Rolltap-Rollout": "other"})
        assert set(generated.text.split()) <= set(WORDS)
        assert len(generated.text.split()) == 16
        assert (await clients.say("chat", False, {"X-Rolltap-Rollout": "a"})).text == "A"
        assert clients.sim.stats.script_turns == {"a": 1}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_faulted_or_refused_call_keeps_its_turn(
    scripted: Clients, session: aiohttp.ClientSession, dialect: str
) -> None:
    url = scripted.sim.url + _PATHS[dialect]
    headers = {"x-sim-fault": "status=503"}
    async with session.post(url, json=_BODIES[dialect](), headers=headers) as resp:
        assert resp.status == 503
    bad = {"model": "m"}  # no messages / input: a 400
    async with session.post(url, json=bad) as resp:
        assert resp.status == 400
    assert scripted.sim.stats.script_turns == {}
    assert (await scripted.say(dialect, False)).text == "Let me look."  # still turn 1


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_the_script_calls_tools_the_request_did_not_offer(
    scripted: Clients, session: aiohttp.ClientSession, dialect: str
) -> None:
    none = {"chat": "none", "messages": {"type": "none"}, "responses": "none"}[dialect]
    tool: dict[str, Any] = {
        "chat": {"type": "function", "function": {"name": "other", "parameters": {}}},
        "messages": {"name": "other", "input_schema": {"type": "object"}},
        "responses": {"type": "function", "name": "other", "parameters": {}},
    }[dialect]
    body = _BODIES[dialect](tools=[tool], tool_choice=none)
    async with session.post(scripted.sim.url + _PATHS[dialect], json=body) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert _call_names(dialect, answer) == ["Bash", "Read"]


def _call_names(dialect: str, answer: dict[str, Any]) -> list[str]:
    """The tools a whole answer calls, in order."""
    if dialect == "chat":
        return [c["function"]["name"] for c in answer["choices"][0]["message"]["tool_calls"]]
    items = answer["content" if dialect == "messages" else "output"]
    kind = "tool_use" if dialect == "messages" else "function_call"
    return [item["name"] for item in items if item["type"] == kind]


async def test_chat_says_null_content_for_calls_alone(
    scripted: Clients, session: aiohttp.ClientSession
) -> None:
    url = scripted.sim.base_url + "/chat/completions"
    for _ in range(2):
        async with session.post(url, json=chat_body()) as resp:
            message = (await resp.json())["choices"][0]["message"]
    assert message["content"] is None
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["Bash"]
    assert message["tool_calls"][0]["id"] == "call_sim_2_0"


async def test_scripted_answers_are_never_served_from_the_body_cache(
    scripted: Clients, session: aiohttp.ClientSession
) -> None:
    """The same body twice gets two turns: answers depend on the session, not the bytes."""
    url = scripted.sim.url + "/v1/messages"
    contents = []
    for _ in range(3):
        async with session.post(url, json=messages_body()) as resp:
            contents.append([b["type"] for b in (await resp.json())["content"]])
    assert contents == [["text", "tool_use", "tool_use"], ["tool_use"], ["text"]]
