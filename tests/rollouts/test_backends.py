"""``rolltap.evaluate(config, backend=...)``: the backend runs the eval and is stored with it.

The worker backends run end to end in tests/serve (``test_eval_workers``: ``Workers``;
``test_ray``: ``Ray``); here, what picks a backend and what each records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rolltap
from rolltap.errors import ConfigError
from rolltap.evaluation import backend_for
from rolltap.rollouts import HarnessContext, RunConfig, Task
from rolltap.sim import Simulator
from rolltap.store import Store


def _config(sim: Simulator, tmp_path: Path, **fields: object) -> RunConfig:
    return RunConfig.model_validate({
        "harness": "chat", "endpoint": sim.base_url, "model": "sim-model", "rewards": ["contains"],
        "store": f"sqlite:///{tmp_path / 'runs.db'}", **fields,
    })  # fmt: skip


def test_without_a_backend_the_config_names_it() -> None:
    assert backend_for(RunConfig()) == rolltap.InProcess()
    assert backend_for(RunConfig(workers=3)) == rolltap.Workers(3)
    ray = RunConfig(ray="auto", workers_per_node=2, ray_working_dir=".")
    assert backend_for(ray) == rolltap.Ray("auto", workers_per_node=2, working_dir=".")


def test_a_backend_is_recorded_in_the_run_config() -> None:
    config = RunConfig(workers=2)
    assert config.placed(rolltap.Ray("local", workers=4).placement()).model_dump(
        include={"workers", "ray", "workers_per_node", "ray_working_dir"}
    ) == {"workers": 4, "ray": "local", "workers_per_node": None, "ray_working_dir": None}
    assert config.placed({}).distributed is False


async def test_in_process_runs_here_whatever_the_config_said(
    sim: Simulator, tmp_path: Path
) -> None:
    config = _config(sim, tmp_path, workers=2)
    tasks = [Task(id="t1", prompt="p"), Task(id="t2", prompt="p")]
    result = await rolltap.evaluate(config, rolltap.InProcess(), tasks=tasks)
    assert result.summary["statuses"] == {"completed": 2}
    assert result.workers == []  # no worker processes
    async with await Store.open(config.store) as store:
        run = await store.get_run(result.run_id)
    assert run.config["run"]["workers"] == 0  # in process: a resume runs here too
    again = await rolltap.resume(result.run_id, store=config.store)
    assert again.run_id == result.run_id and again.workers == []


async def test_a_harness_function_cannot_go_to_workers(sim: Simulator, tmp_path: Path) -> None:
    async def harness(task: Task, ctx: HarnessContext) -> str:
        return task.id

    config = _config(sim, tmp_path)
    tasks = [Task(id="t", prompt="p")]
    with pytest.raises(ConfigError, match="runs only in process"):
        await rolltap.evaluate(config, rolltap.Workers(2), tasks=tasks, harness=harness)
    assert not (tmp_path / "runs.db").exists()  # refused before anything started
    result = await rolltap.evaluate(config, tasks=tasks, harness=harness)
    assert result.summary["statuses"] == {"completed": 1}
