"""``--ray``: a run's workers as Ray actors on a real two-node local cluster.

The cluster (``ray.cluster_utils.Cluster``: two nodes on this machine, 2 logical CPUs
each, dashboard off, a small object store) is started once for the module and listens on
loopback only (tests/conftest.py keeps Ray's addresses on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

import rolltap
from clikit import arolltap, cli_env
from rolltap.errors import ClusterError
from rolltap.rollouts import Hooks, RolloutResult
from rolltap.rollouts.api import Stoppable
from rolltap.serve import ServeClient
from rolltap.serve.supervisor.eval_driver import EvalDriver
from rolltap.sim import Simulator
from rolltap.store import Store
from serve.conftest import upgraded_database
from serve.servekit import TOKEN, chat_spec, read_until
from serve.test_eval_workers import HARNESS, run_config, sessions_of, tasks_file

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.timeout(300)

_NODE = {"num_cpus": 2, "node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A two-node cluster's address."""
    made = ray_cluster_utils.Cluster(
        initialize_head=True, head_node_args={**_NODE, "include_dashboard": False}
    )
    try:
        made.add_node(**_NODE)
        made.wait_for_nodes()
        yield made.address
    finally:
        made.shutdown()


@pytest.fixture(params=["sqlite", "postgresql"])
def ray_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLite (the workers ship their events to the driver) and PostgreSQL (each writes)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ray.db'}"
        return
    yield from upgraded_database("postgresql")


async def test_a_run_lands_on_both_nodes_and_every_rollout_is_stored_once(
    sim: Simulator, tmp_path: Path, cluster: str, ray_store: str
) -> None:
    url = ray_store
    config = run_config(sim, tasks_file(tmp_path / "t.jsonl", 60), url, r=2, c=16)
    result = await rolltap.evaluate(config, rolltap.Ray(cluster, workers=4))
    assert result.summary["statuses"] == {"completed": 120}
    sessions = await sessions_of(url, result.run_id)
    keys = Counter((s.task["task_id"], s.task["sample"]) for s in sessions)
    assert len(keys) == 120 and set(keys.values()) == {1}
    nodes = Counter(s.node_id for s in sessions)
    assert len(nodes) == 2, nodes  # SPREAD: two workers on each node
    assert {w["node"] for w in result.workers} == set(nodes)
    assert sorted(nodes.values()) == sorted(
        sum(w["finished"] for w in result.workers if w["node"] == node) for node in nodes
    )


async def test_kill_9_of_an_actor_costs_only_its_rollouts(
    sim: Simulator, tmp_path: Path, cluster: str
) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    tasks = tasks_file(tmp_path / "t.jsonl", 12, gate="g")
    config = run_config(sim, tasks, url, c=6, ray=cluster, workers=2)
    gate = sim.gate("g")
    landed: list[RolloutResult] = []
    lost = asyncio.Event()
    drivers: list[EvalDriver] = []

    def on_result(res: RolloutResult) -> None:
        landed.append(res)
        if sum(r.status == "worker_lost" for r in landed) == 3:
            lost.set()

    def on_runner(driver: Stoppable) -> None:
        assert isinstance(driver, EvalDriver)
        drivers.append(driver)

    async def kill_one_then_open() -> None:
        await sim.wait_for(lambda _: gate.held == 6, timeout=120)
        # the actor's own process, as its worker reported it (a kill -9 of it)
        pid = drivers[0].workers()[0]["pid"]
        assert pid is not None and "RayWorker" in " ".join(psutil.Process(pid).cmdline())
        os.kill(pid, signal.SIGKILL)
        await asyncio.wait_for(lost.wait(), 120)
        # Ray restarts the actor; it takes the next rollouts while the other is full
        await sim.wait_for(lambda _: gate.held == 6, timeout=120)
        gate.open()

    async with asyncio.TaskGroup() as group:
        group.create_task(kill_one_then_open())
        result = await rolltap.evaluate(
            config, hooks=Hooks(on_result=on_result, on_runner=on_runner)
        )
    assert result.summary["statuses"] == {"completed": 9, "worker_lost": 3}
    restarted = [w for w in result.workers if w["generation"] == 1]
    assert len(restarted) == 1 and restarted[0]["finished"] >= 3
    statuses = sorted(s.status for s in await sessions_of(url, result.run_id))
    assert statuses == ["completed"] * 9 + ["worker_lost"] * 3


async def test_sigterm_of_the_driver_drains_and_exits(
    sim: Simulator, tmp_path: Path, cluster: str
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    tasks = tasks_file(tmp_path / "t.jsonl", 8, gate="g")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rolltap", "eval", tasks, "--harness", HARNESS, "--endpoint",
        sim.base_url, "--model", "sim-model", "--store", url, "--ray", cluster,
        "--workers", "2", "-c", "4",
        env=cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await sim.wait_for(lambda _: sim.gate("g").held == 4, timeout=120)
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        await read_until(proc.stderr, "stopping")
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 143, err.decode()
    async with await Store.open(url) as store:
        (run,) = await store.list_runs()
        sessions = await store.list_sessions(run=run.id)
    assert sorted(s.status for s in sessions) == ["cancelled"] * 4
    assert run.config["run"]["ray"] == cluster


async def test_a_cluster_without_room_fails_the_run_with_one_clear_error(
    sim: Simulator, tmp_path: Path, cluster: str
) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    config = run_config(
        sim, tasks_file(tmp_path / "t.jsonl", 2), url, ray=cluster, workers=9,
        worker_start_timeout_s=3,
    )  # fmt: skip
    with pytest.raises(
        ClusterError, match=r"could not place 9 workers .* within 3 s \(it has 4 CPUs"
    ):
        await rolltap.evaluate(config)
    async with await Store.open(url) as store:
        assert await store.list_runs() == []  # a run that could not start leaves nothing


async def test_serve_places_its_workers_on_the_cluster_behind_the_same_api(
    sim: Simulator, tmp_path: Path, cluster: str
) -> None:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rolltap", "serve", "--endpoint", sim.base_url, "--model",
        "sim-model", "--ray", cluster, "--workers-per-node", "1", "--port", "0", "--store", url,
        "--stats-interval", "0.2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=cli_env(ROLLTAP_SERVE_TOKEN=TOKEN),
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        line = await read_until(proc.stdout, "rolltap serve: http")
        match = re.search(r"(http://\S+)", line)
        assert match, line
        assert "2 workers" in await read_until(proc.stdout, "workers ×")
        async with ServeClient(match.group(1), TOKEN) as client:
            # a policy change reaches the actors over the same channel as everything else
            policy = await client.set_policy_version("ray-1")
            results = [r async for r in client.submit_batch([chat_spec(f"t{i}") for i in range(8)])]
            status = await client.status()
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with client.http.get(match.group(1) + "/metrics", headers=headers) as resp:
                metrics = await resp.text()
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert [r.status for r in results] == ["completed"] * 8
    assert {w["endpoints"]["default"]["version"] for w in policy["workers"]} == {"ray-1"}
    assert len(policy["workers"]) == 2
    assert {tuple(r.policy_versions) for r in results} == {("ray-1",)}
    nodes = {worker["node"] for worker in status["workers"]}
    assert len(nodes) == 2  # one worker on each node
    for node in nodes:
        assert f'rolltap_serve_worker_rss_bytes{{node="{node}"' in metrics
    assert proc.returncode == 0


async def test_ray_local_starts_a_cluster_for_the_run(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    done = await arolltap(
        "eval", tasks_file(tmp_path / "t.jsonl", 6), "--harness", HARNESS, "--endpoint",
        sim.base_url, "--model", "sim-model", "--store", url, "--ray", "local", "--workers", "2",
    )  # fmt: skip
    assert done.code == 0, done.output
    assert "completed" in done.stdout and "workers" in done.stdout  # the per-worker table
    async with await Store.open(url) as store:
        (run,) = await store.list_runs()
        sessions = await store.list_sessions(run=run.id)
    assert sorted(s.status for s in sessions) == ["completed"] * 6
    assert {s.worker_id for s in sessions} <= {"w0", "w1"}
    assert len({s.node_id for s in sessions}) == 1  # one machine, one node


HARNESS_FILE = """
from pathlib import Path

from rolltap.rollouts.harness import HarnessResult


async def reads_note(task, ctx):
    # relative to the worker's working directory: the uploaded one, on every node
    return HarnessResult(Path("note.txt").read_text())
"""


async def test_a_working_dir_reaches_every_worker(
    sim: Simulator, tmp_path: Path, cluster: str
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "noteagent.py").write_text(HARNESS_FILE)
    (code / "note.txt").write_text("the note")
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"id": "a", "prompt": "p", "answer": "the note"}\n')
    url = f"sqlite:///{tmp_path / 'wd.db'}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rolltap", "eval", str(tasks), "--harness", "noteagent:reads_note",
        "--endpoint", sim.base_url, "--model", "sim-model", "--store", url, "--ray", cluster,
        "--workers", "2", "--ray-working-dir", str(code), "-r", "4", "--json",
        env=cli_env(), cwd=code, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()
    summary = orjson.loads(out)
    # without the upload the workers' cwd is Ray's: no note.txt there, every rollout an error
    assert summary["statuses"] == {"completed": 4} and summary["reward"]["mean"] == 1.0
