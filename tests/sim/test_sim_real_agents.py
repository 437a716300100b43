"""The real CLI agents, straight against a scripted simulator (no gateway), go through a
whole tool loop: turn 1 calls the agent's own shell tool to write a file in its working
directory, turn 2 says done; the file is there and the agent exits 0.

Claude Code runs with ``--allowedTools Bash`` (``--dangerously-skip-permissions`` and
``--permission-mode bypassPermissions`` are refused as root unless ``IS_SANDBOX=1``);
Codex CLI with ``--sandbox workspace-write`` (its default, ``read-only``, runs the command
but the write fails; ``-c sandbox_mode="workspace-write"`` and
``--dangerously-bypass-approvals-and-sandbox`` work as well). Without the binary on PATH
the tests skip, except under ``CI=true``, which installs both: there they fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agents.capture import run_agent
from helpers import require_agent
from rolltap.sim import SimConfig, Simulator

_PROMPT = "Create hello.txt holding hi."


def _script(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"tool_call": {"name": name, "arguments": arguments}}, {"text": "done"}]


def _json_lines(output: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.mark.timeout(120)
async def test_claude_code_runs_its_bash_tool_then_stops(tmp_path: Path) -> None:
    claude = require_agent("claude")
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    script = _script("Bash", {"command": "echo hi > hello.txt"})
    async with Simulator(SimConfig(script=script)) as sim:
        env = {
            "HOME": str(home), "ANTHROPIC_BASE_URL": sim.url, "ANTHROPIC_API_KEY": "x",
            "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }  # fmt: skip
        argv = [claude, "-p", _PROMPT, "--output-format", "stream-json", "--verbose",
                "--allowedTools", "Bash"]  # fmt: skip
        code, output = await run_agent(argv, env, cwd)
        last = sim.stats.last_request_body
        turns = dict(sim.stats.script_turns)
    assert code == 0, output[-3000:]
    assert (cwd / "hello.txt").read_text() == "hi\n"
    assert turns == {"": 2}
    # the second call carries the scripted call back, and the tool's result for its id
    blocks = [block for message in last["messages"] if isinstance(message["content"], list)
              for block in message["content"]]  # fmt: skip
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    called = script[0]["tool_call"]
    assert [(u["name"], u["input"]) for u in uses] == [(called["name"], called["arguments"])]
    assert uses[0]["id"].startswith("toolu_sim_")
    assert [r["tool_use_id"] for r in results] == [uses[0]["id"]]
    result = _json_lines(output)[-1]
    assert (result["type"], result["subtype"], result["result"]) == ("result", "success", "done")


@pytest.mark.timeout(120)
async def test_codex_runs_exec_command_then_stops(tmp_path: Path) -> None:
    codex = require_agent("codex")
    codex_home, cwd = tmp_path / "codex", tmp_path / "work"
    codex_home.mkdir()
    cwd.mkdir()
    script = _script("exec_command", {"cmd": "echo hi > hello.txt"})
    async with Simulator(SimConfig(script=script)) as sim:
        (codex_home / "config.toml").write_text(
            'model = "m"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "sim"\n'
            f'base_url = "{sim.base_url}"\nenv_key = "SIM_KEY"\nwire_api = "responses"\n'
        )
        env = {"HOME": str(tmp_path), "CODEX_HOME": str(codex_home), "SIM_KEY": "x"}
        argv = [codex, "exec", "--json", "--skip-git-repo-check", "--sandbox",
                "workspace-write", _PROMPT]  # fmt: skip
        code, output = await run_agent(argv, env, cwd)
        last = sim.stats.last_request_body
        turns = dict(sim.stats.script_turns)
    assert code == 0, output[-3000:]
    assert (cwd / "hello.txt").read_text() == "hi\n"
    assert turns == {"": 2}
    calls = [item for item in last["input"] if item.get("type") == "function_call"]
    outputs = [item for item in last["input"] if item.get("type") == "function_call_output"]
    assert [c["name"] for c in calls] == ["exec_command"]
    assert [o["call_id"] for o in outputs] == [calls[0]["call_id"]]
    assert calls[0]["call_id"].startswith("call_sim_")
    items = [e["item"] for e in _json_lines(output) if e.get("type") == "item.completed"]
    ran = [i for i in items if i["type"] == "command_execution"]
    assert [i["exit_code"] for i in ran] == [0]
    assert items[-1] == {**items[-1], "type": "agent_message", "text": "done"}
