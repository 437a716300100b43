"""``rolltap eval --workers N``: a run's rollouts on worker processes, one run, one summary."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections import Counter
from pathlib import Path

import orjson
import psutil
import pytest

import rolltap
from clikit import arolltap, cli_env
from rolltap.errors import ConfigError
from rolltap.rollouts import Hooks, RolloutResult, RunConfig
from rolltap.rollouts.auto_workers import AUTO_MIN_C, auto_workers, available_cores
from rolltap.sim import Simulator
from rolltap.store import SessionInfo, Store
from serve.servekit import read_until

pytestmark = pytest.mark.timeout(180)

HARNESS = "serve.serve_harnesses:gated"


def tasks_file(path: Path, n: int, gate: str | None = None) -> str:
    """``n`` one-call tasks; with ``gate`` the simulator holds each call there."""
    rows = []
    for i in range(n):
        info = {"gate": gate} if gate else {}
        rows.append(orjson.dumps({"id": f"t{i}", "prompt": f"say t{i}", "info": info}))
    path.write_bytes(b"\n".join(rows) + b"\n")
    return str(path)


def run_config(sim: Simulator, tasks: str, store: str, **fields: object) -> RunConfig:
    return RunConfig.model_validate({
        "tasks": tasks, "harness": HARNESS, "endpoint": sim.base_url, "model": "sim-model",
        "store": store, "rewards": ["contains"], **fields,
    })  # fmt: skip


def worker_processes() -> list[psutil.Process]:
    """This test's serve worker processes (children running ``rolltap.serve.worker.process``)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "rolltap.serve.worker.process" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


async def stored(url: str, run_id: str) -> list[tuple[str, int, str]]:
    return [(s.task["task_id"], s.task["sample"], s.status) for s in await sessions_of(url, run_id)]


async def sessions_of(url: str, run_id: str) -> list[SessionInfo]:
    async with await Store.open(url) as store:
        return await store.list_sessions(run=run_id)


async def test_a_run_on_two_workers_is_one_run_every_rollout_stored_once(
    sim: Simulator, tmp_path: Path, serve_store: str
) -> None:
    url = serve_store
    async with await Store.open(url, upgrade=True):
        pass  # a server database is upgraded by its operator (rolltap db upgrade)
    config = run_config(sim, tasks_file(tmp_path / "t.jsonl", 30), url, r=2, c=8)
    landed: list[RolloutResult] = []
    result = await rolltap.evaluate(
        config, rolltap.Workers(2), hooks=Hooks(on_result=landed.append)
    )
    assert result.summary["statuses"] == {"completed": 60}
    assert len(landed) == 60
    rows = await stored(url, result.run_id)
    assert sorted(rows) == sorted((f"t{i}", s, "completed") for i in range(30) for s in range(2))
    # both workers ran rollouts, and each session says which one (and on which machine)
    assert [w["finished"] > 0 for w in result.workers] == [True, True]
    placed = Counter((s.node_id, s.worker_id) for s in await sessions_of(url, result.run_id))
    node = socket.gethostname()
    assert set(placed) == {(node, "w0"), (node, "w1")}
    assert sorted(placed.values()) == sorted(w["finished"] for w in result.workers)
    assert result.summary["model_calls"] == 60 and result.summary["latency_ms"]["p50"] is not None
    async with await Store.open(url) as store:
        run = await store.get_run(result.run_id)
    assert run.config["run"]["workers"] == 2  # stored with the run: --resume reproduces it


async def test_kill_9_of_a_worker_costs_only_its_rollouts(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    config = run_config(sim, tasks_file(tmp_path / "t.jsonl", 12, gate="g"), url, c=6, workers=2)
    gate = sim.gate("g")
    landed: list[RolloutResult] = []
    lost = asyncio.Event()

    def on_result(res: RolloutResult) -> None:
        landed.append(res)
        if sum(r.status == "worker_lost" for r in landed) == 3:
            lost.set()

    async def kill_one_then_open() -> None:
        await sim.wait_for(lambda _: gate.held == 6, timeout=60)  # 3 on each worker
        victim = worker_processes()[0]
        victim.kill()
        await asyncio.wait_for(lost.wait(), 60)
        # the slot's replacement takes the next rollouts while the other worker is full
        await sim.wait_for(lambda _: gate.held == 6, timeout=60)
        gate.open()

    async with asyncio.TaskGroup() as group:
        group.create_task(kill_one_then_open())
        result = await rolltap.evaluate(config, hooks=Hooks(on_result=on_result))
    assert result.summary["statuses"] == {"completed": 9, "worker_lost": 3}
    assert "worker_lost" in result.summary["errors"]
    replaced = [w for w in result.workers if w["generation"] == 1]
    assert len(replaced) == 1 and replaced[0]["finished"] >= 3
    rows = await stored(url, result.run_id)
    assert sorted(status for _, _, status in rows) == ["completed"] * 9 + ["worker_lost"] * 3
    # the lost ones are what a resume reruns, on workers again
    again = await rolltap.resume(result.run_id, store=url)
    assert again.summary["statuses"] == {"completed": 12}
    assert sorted(await stored(url, result.run_id)) == sorted(
        (f"t{i}", 0, "completed") for i in range(12)
    )


async def test_sigterm_of_the_driver_drains_and_exits(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    tasks = tasks_file(tmp_path / "t.jsonl", 8, gate="g")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rolltap", "eval", tasks, "--harness", HARNESS, "--endpoint",
        sim.base_url, "--model", "sim-model", "--store", url, "--workers", "2", "-c", "4",
        env=cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await sim.wait_for(lambda _: sim.gate("g").held == 4, timeout=90)
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        await read_until(proc.stderr, "stopping")
        _, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 143, err.decode()
    assert "rolltap eval --resume" in err.decode()
    assert worker_processes() == []  # the workers went with it
    async with await Store.open(url) as store:
        (run,) = await store.list_runs()
        sessions = await store.list_sessions(run=run.id)
    assert sorted(s.status for s in sessions) == ["cancelled"] * 4


async def test_workers_fields_are_checked_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="workers_per_node places Ray actors"):
        RunConfig().merged({"workers_per_node": 2})
    config = RunConfig(tasks="x.jsonl", harness="chat", ray="local")
    with pytest.raises(ConfigError, match="--ray needs --endpoint"):
        await rolltap.evaluate(config)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(available_cores() < 2, reason="workers = auto stays in process on one core")
async def test_a_plain_eval_at_c_1024_goes_to_workers_and_says_so(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    tasks = tasks_file(tmp_path / "t.jsonl", 4)
    common = ("eval", tasks, "--harness", HARNESS, "--endpoint", sim.base_url,
              "--model", "sim-model", "--store", url, "-c", str(AUTO_MIN_C))  # fmt: skip
    done = await arolltap(*common)
    assert done.code == 0, done.output
    expected = auto_workers(AUTO_MIN_C)
    line = f"-c {AUTO_MIN_C} on {available_cores()} cores: the rollouts run on {expected} worker"
    assert line in done.stderr
    here = await arolltap(*common, "--workers", "0")  # in this process: no line
    assert here.code == 0 and "worker processes" not in here.stderr, here.output
    async with await Store.open(url) as store:
        runs = sorted(await store.list_runs(), key=lambda run: run.created_at)
    # stored as decided: a resume runs where the run ran
    assert [run.config["run"]["workers"] for run in runs] == [expected, 0]
    bad = await arolltap(*common, "--workers", "two")
    assert bad.code == 2 and "give a number of worker processes, 0 or auto" in bad.stderr
