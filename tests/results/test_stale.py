"""The staleness bound in a run: a rollout whose policy moved on ends ``stale`` — counted,
not failed, not scored, rerun by a resume — while new rollouts run under the new policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import openai
from typer.testing import CliRunner

import rolltap
from rolltap.cli.main import app, register_commands
from rolltap.config import EndpointConfig
from rolltap.gateway import Gateway
from rolltap.results.statuses import STALE
from rolltap.rollouts import Hooks, RunConfig, Task
from rolltap.rollouts.api import Stoppable
from rolltap.rollouts.harness import HarnessContext, HarnessResult
from rolltap.rollouts.runner import Runner
from rolltap.rollouts.workplan import plan_resume
from rolltap.sim import Simulator
from rolltap.store import Store
from rolltap.view import ViewConfig, ViewServer

register_commands()


async def test_max_staleness_ends_the_old_rollout_stale_and_runs_the_new(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    gateways: list[Gateway] = []

    def keep(runner: Stoppable) -> None:
        assert isinstance(runner, Runner)
        gateways.append(runner.gateway)

    async def two_calls(task: Task, ctx: HarnessContext) -> HarnessResult:
        """Two chat calls; the ``old`` task's policy is bumped between them."""
        gateway = gateways[0]
        if task.id == "old":
            await gateway.set_policy_version("v1")
        messages: list[Any] = task.chat_messages()
        async with openai.AsyncOpenAI(
            base_url=ctx.openai_base_url, api_key=ctx.api_key, max_retries=0,
            http_client=ctx.http_client,
        ) as client:  # fmt: skip
            for turn in range(2):
                if task.id == "old" and turn == 1:
                    await gateway.set_policy_version("v2")  # a trainer's update, mid-rollout
                done = await client.chat.completions.create(model=ctx.model, messages=messages)
                messages += [done.choices[0].message.model_dump(exclude_none=True),
                             {"role": "user", "content": "more"}]  # fmt: skip
        return HarnessResult(done.choices[0].message.content or "")

    tasks = [Task(id=name, prompt=f"say {name}") for name in ("old", "new1", "new2")]
    # c = 1: the old rollout ends before the new ones start, in this order
    config = RunConfig(c=1, store=url, max_staleness=1, rewards=["contains"])
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    result = await rolltap.evaluate(
        config, tasks=tasks, harness=two_calls, endpoint=endpoint, hooks=Hooks(on_runner=keep)
    )
    by_task = {res.task_id: res for res in result.results}
    old = by_task["old"]
    assert (old.status, old.reward, old.error_code) == (STALE, None, None)
    assert old.error is not None and old.error.startswith("policy_stale: ")
    assert old.calls.calls == 1 and old.calls.errors == 1  # the second call was refused
    assert {by_task[t].status for t in ("new1", "new2")} == {"completed"}  # new ones still run
    assert {tuple(by_task[t].calls.versions) for t in ("new1", "new2")} == {("v2",)}
    summary = result.summary
    assert summary["statuses"] == {"completed": 2, "stale": 1}
    assert summary["errors"] == {}  # stale is no failure
    assert summary["policy_versions"] == {"versions": ["v1", "v2"], "spanning": 0}
    assert result.ok
    async with await Store.open(url) as store:
        session = await store.get_session(old.session_id or "")
        events = await store.events(session.id)
        refused = [e.payload for e in events if e.kind == "model_error"]
        stored = await store.run_summary(result.run_id)
        runs = {run.id: run for run in await store.list_runs()}
        async with (
            ViewServer(store, ViewConfig(port=0)) as server,
            aiohttp.ClientSession() as http,
        ):
            pages = {}
            for name in ("old", "new1"):
                async with http.get(f"{server.url}sessions/{by_task[name].session_id}") as resp:
                    assert resp.status == 200
                    pages[name] = await resp.text()
    show = ["sessions", "show", session.id, "--store", url]
    shown = await asyncio.to_thread(CliRunner().invoke, app, show, env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    header = shown.output.splitlines()[0]
    assert "status stale" in header and header.endswith(" policy v1"), header
    assert '<dd id="rollout-versions">policy v1</dd>' in pages["old"]
    assert '<dd id="rollout-versions">policy v2</dd>' in pages["new1"]
    async with await Store.open(url) as store:
        items, kept = await plan_resume(store, result.run_id, config, tasks)
    assert session.status == STALE
    assert [(p["code"], p["status"], p["policy_version"]) for p in refused] == [
        ("policy_stale", 409, "v2")
    ]
    assert stored["statuses"] == {"completed": 2, "stale": 1}  # the store's aggregates
    assert stored["errors"] == {}
    run = runs[result.run_id]
    assert (run.n_finished, run.n_failed) == (3, 0)
    # a resume reruns the stale rollout, and only it
    assert [(item.task.id, item.sample) for item in items] == [("old", 0)]
    assert sorted(res.task_id for res in kept) == ["new1", "new2"]
