"""The agent harnesses with stand-in binaries (``ROLLTAP_CLAUDE``/``ROLLTAP_CODEX``):
isolation, events, failures, timeouts that kill everything the agent started, and
``rolltap eval`` refusing to start without the agent CLI."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import rolltap
from rollouts.agentkit import FAKE_CLAUDE, process_state, until, write_agent
from rolltap.config import EndpointConfig
from rolltap.events import Event
from rolltap.rollouts import LimitsConfig, RunConfig, Task
from rolltap.sim import Simulator
from rolltap.store import Store

CLI = "from rolltap.cli.main import main; main()"


def _config(tmp_path: Path, **fields: Any) -> RunConfig:
    return RunConfig.model_validate({"store": f"sqlite:///{tmp_path}/runs.db", **fields})


async def _events(config: RunConfig, session_id: str | None) -> list[Event]:
    async with await Store.open(config.store) as store:
        return await store.events(session_id or "")


async def test_claude_code_runs_isolated_and_is_scored_by_its_check(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLLTAP_CLAUDE", str(write_agent(tmp_path, "claude", FAKE_CLAUDE)))
    # what a user's shell holds must not reach the agent
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-users-own-key")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "users-claude"))
    task = Task(id="t", prompt="-make hello.txt", files={"given.txt": "given"},
                check='test "$(cat hello.txt)" = hello && echo checked')  # fmt: skip
    config = _config(tmp_path, harness="claude-code", harness_options={"max_turns": 4})
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    result = (
        await rolltap.evaluate(config, rolltap.InProcess(), tasks=[task], endpoint=endpoint)
    ).results[0]
    assert (result.status, result.reward, result.components) == ("completed", 1.0, {"check": 1.0})
    seen = orjson.loads(result.answer or "")
    env = seen["env"]
    root = Path(seen["cwd"]).parent
    assert root.name.startswith("rolltap-agent-") and Path(seen["cwd"]).name == "work"
    assert env["HOME"] == str(root / "home") and env["TMPDIR"] == str(root / "tmp")
    assert env["ANTHROPIC_API_KEY"] not in ("the-users-own-key", "")
    assert "/r/" in env["ANTHROPIC_BASE_URL"] and "CLAUDE_CONFIG_DIR" not in env
    assert env["DISABLE_TELEMETRY"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert seen["home_files"] == [] and seen["given"] == "given" and seen["reply"]
    assert seen["argv"][-2:] == ["--", "-make hello.txt"] and "--max-turns" in seen["argv"]
    assert not root.exists()  # removed with the rollout
    events = await _events(config, result.session_id)
    kinds = [e.kind for e in events]
    # the agent's lines as they came, in order with its model call, then the check
    lines = [e.payload["text"] for e in events if e.payload.get("stream") == "stdout"]
    assert orjson.loads(lines[0])["type"] == "system" and lines[1] == "a line that is not JSON"
    assert orjson.loads(lines[2])["type"] == "result" and len(lines) == 3
    assert kinds.index("model_request") < kinds.index("model_response") < kinds.index("check")
    stderr = [e.payload for e in events if e.payload.get("stream") == "stderr"]
    assert stderr == [{"stream": "stderr", "text": "a warning on stderr\n", "bytes": 20}]
    check = next(e.payload for e in events if e.kind == "check")
    assert check["passed"] is True and check["exit_code"] == 0 and check["stdout"] == "checked\n"


async def test_a_failed_turn_fails_the_rollout_without_a_check(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashing = write_agent(tmp_path, "crash", "echo boom >&2; exit 3", python=False)
    limited = write_agent(
        tmp_path,
        "limited",
        (
            'echo \'{"type": "result", "subtype": "error_max_turns", "is_error": true,'
            ' "errors": ["Reached maximum number of turns (1)"]}\'; exit 1'
        ),
        python=False,
    )
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    task = Task(id="t", prompt="p", check="true")
    for agent, fragment in (
        (crashing, "status 3 without a result: boom"),
        (limited, "error_max_turns (status 1): Reached maximum"),
    ):
        monkeypatch.setenv("ROLLTAP_CLAUDE", str(agent))
        config = _config(tmp_path, harness="claude-code")
        result = (
            await rolltap.evaluate(config, rolltap.InProcess(), tasks=[task], endpoint=endpoint)
        ).results[0]
        assert (result.status, result.reward) == ("failed", 0.0)
        assert fragment in (result.error or "")
        assert "check" not in [e.kind for e in await _events(config, result.session_id)]


async def test_codex_gets_its_own_config_and_its_last_message_is_the_answer(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = write_agent(tmp_path, "codex", (
        "import json, os, sys\n"
        "home = os.environ['CODEX_HOME']\n"
        "config = open(os.path.join(home, 'config.toml')).read()\n"
        "for text in ('first', json.dumps({'config': config, 'env': dict(os.environ),"
        " 'argv': sys.argv[1:]})):\n"
        "    print(json.dumps({'type': 'item.completed', 'item': {'type': 'agent_message',"
        " 'text': text}}))\n"
        "print(json.dumps({'type': 'turn.completed'}))\n"))  # fmt: skip
    monkeypatch.setenv("ROLLTAP_CODEX", str(fake))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "users-codex"))
    monkeypatch.setenv("OPENAI_API_KEY", "the-users-own-key")
    config = _config(tmp_path, harness="codex", rewards=["exact"])
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    result = await rolltap.evaluate(
        config, rolltap.InProcess(), tasks=[Task(id="t", prompt="p")], endpoint=endpoint
    )
    seen = orjson.loads(result.results[0].answer or "")
    env = seen["env"]
    assert env["CODEX_HOME"] == os.path.join(env["HOME"], ".codex")
    assert env["ROLLTAP_API_KEY"] and "OPENAI_API_KEY" not in env
    assert 'model = "sim-model"' in seen["config"]
    assert 'env_key = "ROLLTAP_API_KEY"' in seen["config"]
    assert seen["argv"] == ["exec", "--json", "--skip-git-repo-check", "--ephemeral", "--", "p"]


async def test_a_timeout_kills_the_agent_and_all_it_started(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one child in the agent's group, one in a session of its own (as Claude Code starts
    # its Bash tool): a kill of the group alone would leave the second behind
    agent = write_agent(tmp_path, "claude", (
        f"sleep 300 & echo $! > {tmp_path}/grouped\n"
        f"setsid sleep 300 & echo $! > {tmp_path}/detached\n"
        "echo started; wait\n"), python=False)  # fmt: skip
    monkeypatch.setenv("ROLLTAP_CLAUDE", str(agent))
    config = _config(tmp_path, harness="claude-code", limits=LimitsConfig(timeout_s=3))
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    task = Task(id="t", prompt="p", check="true")
    result = (
        await rolltap.evaluate(config, rolltap.InProcess(), tasks=[task], endpoint=endpoint)
    ).results[0]
    assert result.status == "timeout"
    for marker in ("grouped", "detached"):
        pid = int((tmp_path / marker).read_text())
        assert process_state(pid) in ("gone", "Z"), marker
    events = await _events(config, result.session_id)
    assert [e.payload["text"] for e in events if e.kind == "harness_output"] == ["started"]


async def test_checks_score_and_record_for_cmd_harnesses(sim: Simulator, tmp_path: Path) -> None:
    marker = tmp_path / "check.pid"
    tasks = [
        Task(id="pass", prompt="p", files={"in/a.txt": "a"},
             check='test "$(cat made.txt in/a.txt)" = madea && echo out && echo err >&2'),
        Task(id="fail", prompt="p", check="echo no; exit 4"),
        Task(id="slow", prompt="p", check=f"sleep 300 & echo $! > {marker}; wait",
             check_timeout_s=0.5),
    ]  # fmt: skip
    command = 'cd "$ROLLTAP_WORKDIR" && printf made > made.txt && echo answer'
    config = _config(tmp_path, cmd=command)
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    run = await rolltap.evaluate(config, rolltap.InProcess(), tasks=tasks, endpoint=endpoint)
    results = {r.task_id: r for r in run.results}
    assert {k: (r.status, r.reward) for k, r in results.items()} == {
        "pass": ("completed", 1.0),
        "fail": ("completed", 0.0),
        "slow": ("completed", 0.0),
    }
    checks = {}
    for task_id, result in results.items():
        events = await _events(config, result.session_id)
        checks[task_id] = next(e.payload for e in events if e.kind == "check")
    assert (checks["pass"]["stdout"], checks["pass"]["stderr"]) == ("out\n", "err\n")
    assert checks["pass"]["stdout_bytes"] == 4 and checks["pass"]["passed"] is True
    assert (checks["fail"]["exit_code"], checks["fail"]["stdout"]) == (4, "no\n")
    slow = checks["slow"]
    assert (slow["passed"], slow["timed_out"], slow["exit_code"]) == (False, True, None)
    assert slow["timeout_s"] == 0.5
    assert process_state(int(marker.read_text())) in ("gone", "Z")


async def _eval(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "eval", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


@pytest.mark.parametrize(
    ("kind", "variable", "given", "lines"),
    [
        ("claude-code", "ROLLTAP_CLAUDE", None, [
            "error [missing_agent] the claude-code harness runs the claude CLI: 'claude' is"
            " not on PATH and ROLLTAP_CLAUDE is not set",
            "hint: npm install -g @anthropic-ai/claude-code"]),
        ("codex", "ROLLTAP_CODEX", "/nowhere/codex", [
            "error [missing_agent] the codex harness runs the codex CLI:"
            " ROLLTAP_CODEX=/nowhere/codex is not an executable file",
            "hint: npm install -g @openai/codex"]),
    ],
)  # fmt: skip
async def test_a_missing_agent_cli_stops_eval_before_a_run(
    tmp_path: Path, kind: str, variable: str, given: str | None, lines: list[str]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "p", "check": "true"}\n')
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ROLLTAP_CLAUDE", "ROLLTAP_CODEX")}
    env["PATH"] = str(empty)  # no claude, no codex
    if given is not None:
        env[variable] = given
    db = tmp_path / "runs.db"
    flags = ["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--store", f"sqlite:///{db}"]
    code, err = await _eval(env, str(tasks), "--harness", kind, *flags)
    assert code == 2
    assert err.splitlines() == lines
    assert not db.exists()  # nothing was created: not even the store


async def test_kill_9_of_eval_takes_the_agent_with_it(sim: Simulator, tmp_path: Path) -> None:
    agent = write_agent(tmp_path, "claude", (
        f"sleep 300 & echo $! > {tmp_path}/child.pid\n"
        f"echo $$ > {tmp_path}/agent.pid; wait\n"), python=False)  # fmt: skip
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "p"}\n')
    env = {**os.environ, "ROLLTAP_CLAUDE": str(agent)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "eval", str(tasks), "--harness", "claude-code",
        "--endpoint", sim.base_url, "--model", "sim-model", "--store",
        f"sqlite:///{tmp_path}/runs.db", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    markers = [tmp_path / "child.pid", tmp_path / "agent.pid"]
    try:
        await until(lambda: all(m.exists() and m.read_text().strip() for m in markers))
    finally:
        proc.send_signal(signal.SIGKILL)  # no cleanup of its own: the watchdog's work
        await proc.wait()
    pids = [int(marker.read_text()) for marker in markers]
    # the watchdog: SIGTERM to the agent's group, SIGKILL 2 s later
    await until(lambda: all(process_state(pid) in ("gone", "Z") for pid in pids))
