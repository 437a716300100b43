"""``--cmd`` harnesses: a separate process on the real OpenAI SDK, exits, timeouts."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import rolltap
from rolltap.config import EndpointConfig
from rolltap.rollouts import LimitsConfig, RunConfig, Task, command_harness
from rolltap.sim import Simulator
from rolltap.store import Store

AGENT = Path(__file__).with_name("sdk_agent.py")


def _config(tmp_path: Path, **fields: object) -> RunConfig:
    return RunConfig.model_validate(
        {"store": f"sqlite:///{tmp_path}/runs.db", "rewards": ["regex"], **fields}
    )


async def test_sdk_process_answers_through_the_gateway(sim: Simulator, tmp_path: Path) -> None:
    tasks = [
        Task(id="ok", prompt="hello", info={"regex": r"\w+"}),
        Task(id="bad", prompt="hello", info={"exit": 3}),
    ]
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    config = _config(tmp_path, cmd=command, c=2)
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    result = await rolltap.evaluate(config, rolltap.InProcess(), tasks=tasks, endpoint=endpoint)
    by_task = {res.task_id: res for res in result.results}
    assert (by_task["ok"].status, by_task["ok"].reward) == ("completed", 1.0)
    assert by_task["ok"].calls.calls == 1
    assert by_task["bad"].status == "failed"
    assert "status 3" in (by_task["bad"].error or "")
    async with await Store.open(config.store) as store:
        events = await store.events(by_task["ok"].session_id or "")
        outputs = {
            e.payload["stream"]: e.payload["text"] for e in events if e.kind == "harness_output"
        }
        assert outputs == {"stdout": "log line on stdout\n", "stderr": "log line on stderr\n"}
        assert [e.kind for e in events][:2] == ["model_request", "model_response"]
        bad = await store.events(by_task["bad"].session_id or "")
        assert any(e.payload.get("text") == "giving up\n" for e in bad)


async def test_hanging_command_is_killed_on_timeout(sim: Simulator, tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    # the shell starts a grandchild that would outlive a plain kill of the shell
    command = f"sleep 300 & echo $! > {shlex.quote(str(marker))}; wait"
    config = _config(tmp_path, c=1, limits=LimitsConfig(timeout_s=0.5))
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    result = await rolltap.evaluate(
        config, tasks=[Task(id="t", prompt="p")], endpoint=endpoint,
        harness=command_harness(command),
    )  # fmt: skip
    assert result.results[0].status == "timeout"
    pid = int(marker.read_text())
    assert _state(pid) in ("gone", "Z")  # killed with its group (at most a zombie)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "gone"
