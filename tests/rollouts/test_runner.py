"""The runner against the simulator: scale, persistence order, rewards, statuses."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import orjson
from typer.testing import CliRunner

from rolltap.cli.main import register_commands
from rolltap.config import EndpointConfig
from rolltap.rollouts import LimitsConfig, Task
from rolltap.rollouts.builtin import chat_harness
from rolltap.rollouts.harness import HarnessContext, HarnessResult
from rolltap.sim import Simulator
from rolltap.store import Store
from runkit import evaluate


def _endpoint(sim: Simulator) -> EndpointConfig:
    return EndpointConfig(base_url=sim.base_url, model="sim-model")


def _three_turn_tasks(count: int) -> list[Task]:
    users = [{"role": "user", "content": f"turn {i}"} for i in range(3)]
    # every third task asks for something the simulator never says
    return [
        Task(id=f"t{i}", messages=users, info={"regex": "^NEVER$" if i % 3 == 0 else r"\w"})
        for i in range(count)
    ]


async def test_200_rollouts_3_turns_all_stored_in_order(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    result = await evaluate(
        _three_turn_tasks(200), harness="chat", endpoint=_endpoint(sim), c=64,
        rewards=["regex", "rollout_harnesses:turns_reward"], store=url,
    )  # fmt: skip
    assert result.summary["statuses"] == {"completed": 200}
    assert result.summary["model_calls"] == 600
    async with await Store.open(url) as store:
        sessions = await store.list_sessions(run=result.run_id)
        assert len(sessions) == 200
        for session in sessions:
            task_id = session.task["task_id"]
            expected = 0.5 if int(task_id[1:]) % 3 == 0 else 1.0
            assert (session.status, session.reward) == ("completed", expected), task_id
            events = await store.events(session.id)
            assert [e.seq for e in events] == list(range(len(events)))
            kinds = [e.kind for e in events]
            assert kinds == ["model_request", "model_response"] * 3 + ["reward", "status"]
            assert events[-2].payload["regex"] == (0.0 if expected == 0.5 else 1.0)
    assert sim.stats.peak_in_flight <= 64


async def test_harness_failures_become_statuses(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    tasks = [Task(id="a", prompt="x", answer="y")]
    outcomes: dict[str, Any] = {}
    for harness in ("rollout_harnesses:raises", "rollout_harnesses:wrong_type"):
        result = await evaluate(tasks, harness=harness, endpoint=_endpoint(sim), store=url)
        outcomes[harness] = result.results[0]
    hung = await evaluate(
        tasks, harness="rollout_harnesses:hangs", endpoint=_endpoint(sim), store=url,
        limits=LimitsConfig(timeout_s=0.2),
    )  # fmt: skip
    raised = outcomes["rollout_harnesses:raises"]
    assert (raised.status, raised.reward) == ("failed", 0.0)
    assert "harness bug on task a" in (raised.error or "")
    assert outcomes["rollout_harnesses:wrong_type"].status == "failed"
    assert hung.results[0].status == "timeout"
    async with await Store.open(url) as store:
        statuses = sorted(s.status for s in await store.list_sessions())
    assert statuses == ["failed", "failed", "timeout"]


async def test_each_rollout_gets_its_own_open_http_client(sim: Simulator, tmp_path: Path) -> None:
    seen: list[httpx2.AsyncClient] = []

    async def harness(task: Task, ctx: HarnessContext) -> HarnessResult:
        assert ctx.http_client is not None
        seen.append(ctx.http_client)
        result = await chat_harness(task, ctx)
        # the SDK client built on it must not have closed the runner's client
        assert not ctx.http_client.is_closed
        return result

    result = await evaluate(
        [Task(id="t", prompt="hi")], harness=harness, endpoint=_endpoint(sim), r=4, c=4,
        store=f"sqlite:///{tmp_path}/runs.db",
    )  # fmt: skip
    assert result.summary["statuses"] == {"completed": 4}
    assert len({id(client) for client in seen}) == 4
    assert all(client.is_closed for client in seen)


async def test_runs_compare_sets_two_runs_side_by_side(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    tasks = _three_turn_tasks(3)
    run_ids = []
    for reward in ("regex", "contains"):
        result = await evaluate(
            tasks, harness="chat", endpoint=_endpoint(sim), rewards=[reward], store=url
        )
        run_ids.append(result.run_id)
    args = ["runs", "compare", *run_ids, "--store", url, "--json"]
    out = await asyncio.to_thread(CliRunner().invoke, register_commands(), args)
    assert out.exit_code == 0, out.output
    runs = orjson.loads(out.stdout)
    assert list(runs) == run_ids
    # task t0 asks for what the simulator never says; no task has an answer to contain
    assert runs[run_ids[0]]["reward"]["mean"] == 2 / 3
    assert runs[run_ids[1]]["reward"]["mean"] == 0.0
    assert runs[run_ids[0]]["statuses"] == {"completed": 3}
