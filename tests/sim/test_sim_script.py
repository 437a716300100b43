"""The simulator's script format (``rolltap sim --script FILE``): what it holds, what it
refuses at start-up (one ConfigError naming the entry), and the command line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from clikit import assert_one_line_error, rolltap
from rolltap.cli.sim_cmd import run_sim
from rolltap.errors import ConfigError
from rolltap.sim import (
    Script,
    ScriptTurn,
    SimConfig,
    Simulator,
    ToolCall,
    load_script,
    parse_script,
)
from rolltap.sim.script import DONE, ScriptPlayer
from sim.simkit import sim_cli

EXAMPLE: dict[str, Any] = {
    "default": [
        {"tool_call": {"name": "Bash", "arguments": {"command": "echo hi > hello.txt"}}},
        {"text": "done"},
    ],
    "sessions": {
        "r1": [
            {"text": "Two at once.", "tool_calls": [
                {"name": "Read", "arguments": {"file_path": "a.txt"}},
                {"name": "Ping"},
            ]},
        ],
    },
}  # fmt: skip


def test_the_documented_example_parses_to_turns() -> None:
    script = parse_script(EXAMPLE)
    bash = ToolCall("Bash", '{"command":"echo hi > hello.txt"}')
    assert script.default == (ScriptTurn("", (bash,)), ScriptTurn("done"))
    read = ToolCall("Read", '{"file_path":"a.txt"}')
    assert script.sessions == {"r1": (ScriptTurn("Two at once.", (read, ToolCall("Ping", "{}"))),)}
    assert script.turns_for("r1") == script.sessions["r1"]
    assert script.turns_for("other") == script.turns_for(None) == script.default


def test_a_list_is_the_default_and_no_default_leaves_others_unscripted() -> None:
    assert parse_script([{"text": "hi"}]) == Script((ScriptTurn("hi"),), {})
    only = parse_script({"sessions": {"r1": [{"text": "hi"}]}})
    assert only.turns_for("r1") == (ScriptTurn("hi"),)
    assert only.turns_for("r2") is None
    assert only.turns_for(None) is None


def test_the_player_counts_per_session_and_says_done_after_the_last_turn() -> None:
    player = ScriptPlayer(parse_script(EXAMPLE))
    first = player.peek(None, 7)
    assert first is not None
    assert [c.id for c in first.calls] == ["sim_7_0"]
    assert player.peek(None, 8) == parse_script(EXAMPLE).default[0].numbered(8)  # type: ignore[index]
    assert player.advance(None) == 1
    assert player.peek(None, 9) == ScriptTurn("done")
    assert player.advance(None) == 2
    assert player.peek(None, 10) == DONE
    turn = player.peek("r1", 11)  # a session of its own: its own first turn
    assert turn is not None
    assert [c.id for c in turn.calls] == ["sim_11_0", "sim_11_1"]
    assert ScriptPlayer(parse_script({"sessions": {}})).peek("x", 1) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("turns", "top level: expected {"),
        ({"defaults": []}, "top level: unknown key 'defaults' (allowed: default, sessions)"),
        ({"default": {"text": "x"}}, "default: must be a list of turns, got an object"),
        ({"default": ["hi"]}, "default[0]: a turn is an object, got a string"),
        ({"default": [{}]}, 'default[0]: a turn needs "text", "tool_call" or "tool_calls"'),
        ({"default": [{"txt": "x"}]}, "default[0]: unknown key 'txt'"),
        ({"default": [{"text": 3}]}, "default[0].text: must be a string, got a number"),
        ({"default": [{"text": "a"}, {"tool_call": {"name": "Bash", "arguments": "ls"}}]},
         "default[1].tool_call.arguments: must be a JSON object, got a string"),
        ({"default": [{"tool_call": {"arguments": {}}}]},
         "default[0].tool_call.name: a non-empty string is required, got null"),
        ({"default": [{"tool_call": {"name": "", "arguments": {}}}]},
         "default[0].tool_call.name: a non-empty string is required"),
        ({"default": [{"tool_call": {"name": "a", "args": {}}}]},
         "default[0].tool_call: unknown key 'args' (allowed: name, arguments)"),
        ({"default": [{"tool_call": ["Bash"]}]}, "default[0].tool_call: a tool call is {"),
        ({"default": [{"tool_calls": []}]},
         "default[0].tool_calls: must be a non-empty list of calls, got an empty list"),
        ({"default": [{"tool_calls": {"name": "a"}}]},
         "default[0].tool_calls: must be a non-empty list of calls, got an object"),
        ({"default": [{"tool_call": {"name": "a"}, "tool_calls": [{"name": "b"}]}]},
         'default[0]: give "tool_call" or "tool_calls", not both'),
        ({"sessions": {"r1": [{"text": "a"}, {"tool_calls": [{"name": "a"}, {"name": 1}]}]}},
         'sessions["r1"][1].tool_calls[1].name: a non-empty string is required, got a number'),
        ({"sessions": [["r1"]]}, "sessions: must be an object of session id to turns, got a list"),
    ],
)  # fmt: skip
def test_a_bad_entry_is_one_config_error_naming_it(data: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_script(data, "s.json")
    assert caught.value.message.startswith("invalid simulator script s.json: ")
    assert message in caught.value.message


def test_a_file_loads_and_its_mistakes_name_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_bytes(orjson.dumps(EXAMPLE))
    assert load_script(good) == parse_script(EXAMPLE)
    assert SimConfig(script=good).script == parse_script(EXAMPLE)
    assert SimConfig(script=str(good)).script == parse_script(EXAMPLE)
    bad = tmp_path / "bad.json"
    bad.write_text('{"default": [\n  {"text": "a"},,\n]}')
    with pytest.raises(ConfigError, match=r"bad\.json: line 2 column \d+: not valid JSON"):
        load_script(bad)
    with pytest.raises(ConfigError, match=r"cannot read simulator script .*missing\.json"):
        load_script(tmp_path / "missing.json")


def test_sim_config_takes_data_and_refuses_a_bad_script() -> None:
    assert SimConfig(script=EXAMPLE).script == parse_script(EXAMPLE)
    assert SimConfig().script is None
    with pytest.raises(ConfigError, match=r"default\[0\]: unknown key 'say'"):
        SimConfig(script={"default": [{"say": "hi"}]})


# -- the command line -----------------------------------------------------------------------


def test_help_documents_the_script_format() -> None:
    result = sim_cli("--help")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    for part in (
        "--script",
        '{"default": [TURN, …], "sessions": {"ID": [TURN, …]}}',
        '{"tool_call": CALL}',
        '{"tool_calls": [CALL, …]}',
        '{"name": "Bash", "arguments": {"command": "echo hi > hello.txt"}}',
        "X-Rolltap-Rollout",
        "X-Session-ID",
        'the text "done"',
    ):
        assert part in text, part


def test_a_bad_script_file_is_one_line_naming_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_bytes(orjson.dumps({"default": [{"tool_call": {"name": "Bash"}}, {"texts": "x"}]}))
    line = assert_one_line_error(rolltap("sim", "--port", "0", "--script", str(path)), 2,
                                 "invalid_config")  # fmt: skip
    assert f"invalid simulator script {path}: default[1]: unknown key 'texts'" in line


async def test_run_sim_serves_the_script(tmp_path: Path) -> None:
    stop = asyncio.Event()
    ready: asyncio.Queue[Simulator] = asyncio.Queue()
    config = SimConfig(script=[{"text": "scripted words"}])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(run_sim(config, "127.0.0.1", 0, on_ready=ready.put_nowait, stop=stop))
        sim = await ready.get()
        async with aiohttp.ClientSession() as http:
            async with http.post(sim.base_url + "/chat/completions", json=body) as resp:
                answer = await resp.json()
            async with http.get(sim.url + "/stats") as resp:
                stats = await resp.json()
        stop.set()
    assert answer["choices"][0]["message"]["content"] == "scripted words"
    assert stats["script_turns"] == {"": 1}
