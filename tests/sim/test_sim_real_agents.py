"""The real CLI agents, straight against a scripted simulator (no gateway), go through a
whole tool loop: turn 1 calls the agent's own shell tool to write a file in its working
directory, turn 2 says done; the file is there and the agent exits 0.

Claude Code runs with ``--allowedTools Bash`` (``--dangerously-skip-permissions`` and
``--permission-mode bypassPermissions`` are refused as root unless ``IS_SANDBOX=1``);
Codex CLI with ``--sandbox workspace-write`` (its default, ``read-only``, runs the command
but the write fails; ``-c sandbox_mode="workspace-write"`` and
``--dangerously-bypass-approvals-and-sandbox`` work as well). Without the binary on PATH
the tests skip, except under ``CI=true``, which installs both: there they fail. The
command lines and the script are the capture's (:mod:`agents.capture`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agents.capture import LOOP_PROMPT, agent_command, loop_script, run_agent
from helpers import require_agent
from rolltap.sim import SimConfig, Simulator


def _json_lines(output: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]


async def _tool_loop(agent: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """Run ``agent`` (``claude_code`` or ``codex``) through the scripted tool loop straight
    against a simulator and check that it went round: exit 0, the file written, both of
    the script's turns said. The agent's output, and the last request it sent."""
    require_agent("claude" if agent == "claude_code" else "codex")
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    async with Simulator(SimConfig(script=loop_script(agent))) as sim:
        argv, env = agent_command(agent, sim.url, home, LOOP_PROMPT, loop=True)
        code, output = await run_agent(argv, env, cwd)
        last = sim.stats.last_request_body
        turns = dict(sim.stats.script_turns)
    assert code == 0, output[-3000:]
    assert (cwd / "hello.txt").read_text() == "hi\n"
    assert turns == {"": 2}
    return output, last


@pytest.mark.timeout(120)
async def test_claude_code_runs_its_bash_tool_then_stops(tmp_path: Path) -> None:
    output, last = await _tool_loop("claude_code", tmp_path)
    # the second call carries the scripted call back, and the tool's result for its id
    blocks = [block for message in last["messages"] if isinstance(message["content"], list)
              for block in message["content"]]  # fmt: skip
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    called = loop_script("claude_code")[0]["tool_call"]
    assert [(u["name"], u["input"]) for u in uses] == [(called["name"], called["arguments"])]
    assert uses[0]["id"].startswith("toolu_sim_")
    assert [r["tool_use_id"] for r in results] == [uses[0]["id"]]
    result = _json_lines(output)[-1]
    assert (result["type"], result["subtype"], result["result"]) == ("result", "success", "done")


@pytest.mark.timeout(120)
async def test_codex_runs_exec_command_then_stops(tmp_path: Path) -> None:
    output, last = await _tool_loop("codex", tmp_path)
    calls = [item for item in last["input"] if item.get("type") == "function_call"]
    outputs = [item for item in last["input"] if item.get("type") == "function_call_output"]
    assert [c["name"] for c in calls] == ["exec_command"]
    assert [o["call_id"] for o in outputs] == [calls[0]["call_id"]]
    assert calls[0]["call_id"].startswith("call_sim_")
    items = [e["item"] for e in _json_lines(output) if e.get("type") == "item.completed"]
    ran = [i for i in items if i["type"] == "command_execution"]
    assert [i["exit_code"] for i in ran] == [0]
    assert items[-1] == {**items[-1], "type": "agent_message", "text": "done"}
