"""Limits and sampling through the runner; Ctrl-C and ``--resume`` through the CLI."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import orjson

from clikit import cli_env
from rolltap.config import EndpointConfig
from rolltap.rollouts import LimitsConfig, Task
from rolltap.sim import Simulator
from rolltap.store import Store
from runkit import evaluate

HERE = Path(__file__).parent
# the real entry point, as `rolltap` runs it
CLI = "from rolltap.cli.main import main; main()"


def _endpoint(sim: Simulator) -> EndpointConfig:
    return EndpointConfig(base_url=sim.base_url, model="sim-model")


def _turns(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"q{i}"} for i in range(n)]


async def test_each_limit_ends_limit_reached(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    task = Task(id="t", messages=_turns(4), answer="x")
    for limits in (LimitsConfig(max_turns=2), LimitsConfig(max_tokens=20)):
        result = await evaluate([task], endpoint=_endpoint(sim), store=url, limits=limits)
        assert result.results[0].status == "limit_reached", limits
        assert result.results[0].calls.calls < 4
    async with await Store.open(url) as store:
        sessions = await store.list_sessions()
        assert [s.status for s in sessions] == ["limit_reached", "limit_reached"]
        status = (await store.events(sessions[0].id))[-1]
        assert (status.kind, status.payload["limit"]) == ("status", "max_turns")


async def test_sampling_override_is_recorded(sim: Simulator, tmp_path: Path) -> None:
    result = await evaluate(
        [Task(id="t", prompt="p")], endpoint=_endpoint(sim), store=f"sqlite:///{tmp_path}/r.db",
        sampling={"temperature": 0.0, "max_tokens": 3},
    )  # fmt: skip
    assert sim.stats.last_request_body["max_tokens"] == 3
    assert sim.stats.last_request_body["temperature"] == 0.0
    assert result.results[0].calls.completion_tokens == 3
    async with await Store.open(f"sqlite:///{tmp_path}/r.db") as store:
        events = await store.events(result.results[0].session_id or "")
    assert "max_tokens" in orjson.dumps(events[0].payload).decode()


async def _read_until(stream: asyncio.StreamReader, text: str) -> list[str]:
    lines: list[str] = []
    while line := (await stream.readline()).decode():
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never came: {''.join(lines)}")


async def _eval(args: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "eval", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip


async def test_sigint_then_resume_finishes_exactly_the_rest(sim: Simulator, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"prompt": f"p{i}", "info": {"hang": i >= 4, "regex": "."}} for i in range(8)]
    tasks.write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    url = f"sqlite:///{tmp_path}/runs.db"
    args = [str(tasks), "--harness", "rollout_harnesses:hang_on_marked", "--endpoint",
            sim.base_url, "--model", "m", "-r", "2", "-c", "4", "--reward", "regex",
            "--store", url]  # fmt: skip
    # this checkout's rolltap, and this folder's harnesses
    env = cli_env(ROLLTAP_TEST_HANG="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env["PYTHONPATH"]])
    first = await _eval(args, env)
    assert first.stderr is not None
    # tasks 1-4 (8 rollouts) finish; the hanging ones then fill all 4 slots
    await _read_until(first.stderr, "done 8/16")
    first.send_signal(signal.SIGINT)
    _, err = await first.communicate()
    assert first.returncode == 130, err.decode()
    run_id = err.decode().split("--resume ")[1].split()[0]
    async with await Store.open(url) as store:
        statuses = sorted(s.status for s in await store.list_sessions(run=run_id))
    # the 8 finished ones stay; the hanging ones in flight (4, or 3 if the signal beat the
    # admission of the next) were cancelled cleanly
    assert statuses.count("completed") == 8
    assert set(statuses) == {"cancelled", "completed"}
    env.pop("ROLLTAP_TEST_HANG")
    second = await _eval(["--resume", run_id, "--store", url, "--json"], env)
    out, err = await second.communicate()
    assert second.returncode == 0, err.decode()
    assert "run " + run_id + ": 8 rollouts" in err.decode()
    summary = orjson.loads(out)
    assert summary["statuses"] == {"completed": 16}
    assert summary["reward"]["mean"] == 1.0
    async with await Store.open(url) as store:
        sessions = await store.list_sessions(run=run_id)
    keys = sorted((s.task["task_id"], s.task["sample"]) for s in sessions)
    assert keys == sorted((str(i), k) for i in range(1, 9) for k in range(2))
    assert {s.status for s in sessions} == {"completed"}


async def test_a_second_sigint_still_names_the_resume_and_it_finishes(
    sim: Simulator, tmp_path: Path
) -> None:
    # an impatient user presses Ctrl-C twice: the second cancels the command outright
    # (no summary), yet its last words say how to finish the run, and that works
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"prompt": f"p{i}", "info": {"hang": i >= 2, "regex": "."}} for i in range(4)]
    tasks.write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    url = f"sqlite:///{tmp_path}/runs.db"
    args = [str(tasks), "--harness", "rollout_harnesses:slow_to_stop", "--endpoint",
            sim.base_url, "--model", "m", "-c", "2", "--reward", "regex",
            "--store", url]  # fmt: skip
    env = cli_env(ROLLTAP_TEST_HANG="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env["PYTHONPATH"]])
    first = await _eval(args, env)
    assert first.stderr is not None
    await _read_until(first.stderr, "done 2/4")  # the hanging two now hold both slots
    first.send_signal(signal.SIGINT)
    await _read_until(first.stderr, "stopping:")  # still stopping: the harness cleans up
    first.send_signal(signal.SIGINT)
    _, rest = await first.communicate()
    err = rest.decode()
    assert first.returncode == 130, err
    assert "stopped" in err  # cancelled outright: no summary
    run_id = err.split("--resume ")[1].split()[0]
    env.pop("ROLLTAP_TEST_HANG")
    second = await _eval(["--resume", run_id, "--store", url, "--json"], env)
    out, err2 = await second.communicate()
    assert second.returncode == 0, err2.decode()
    assert orjson.loads(out)["statuses"] == {"completed": 4}
