"""How a run reports what went wrong: error codes in the summary, stages, success."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from rolltap.cli.compare import summarize_run
from rolltap.cli.report import ProgressReporter, render_summary
from rolltap.config import EndpointConfig
from rolltap.results.rollout import RolloutResult
from rolltap.results.summary import summarize
from rolltap.rollouts import RunResult, Task
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store
from runkit import evaluate


async def test_failed_rollouts_are_counted_by_error_code(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    tasks = [Task(id=f"t{i}", prompt="p") for i in range(3)]
    async with Simulator(SimConfig(faults=("status=500",))) as broken:
        upstream = EndpointConfig(base_url=broken.base_url, model="m")
        failing = await evaluate(tasks, endpoint=upstream, store=url)
    raising = await evaluate(
        tasks[:2], harness="rollout_harnesses:raises",
        endpoint=EndpointConfig(base_url=sim.base_url, model="m"), store=url,
    )  # fmt: skip
    assert failing.summary["errors"].keys() == {"upstream_http_error"}
    assert failing.summary["errors"]["upstream_http_error"]["count"] == 3
    assert not failing.ok
    errors = raising.summary["errors"]
    assert list(errors) == ["harness_error"] and errors["harness_error"]["count"] == 2
    assert errors["harness_error"]["first_message"].startswith("RuntimeError: harness bug on t")
    async with await Store.open(url) as store:  # `runs compare` rebuilds the same counts
        for run in (raising, failing):
            stored = (await summarize_run(store, run.run_id))["errors"]
            counts = {code: entry["count"] for code, entry in stored.items()}
            assert counts == {code: e["count"] for code, e in run.summary["errors"].items()}
    out = io.StringIO()
    render_summary(Console(file=out, width=200), failing.run_id, failing.summary)
    assert "error upstream_http_error" in out.getvalue() and "× 3" in out.getvalue()


async def test_a_run_with_one_completed_rollout_is_ok(sim: Simulator, tmp_path: Path) -> None:
    result = await evaluate(
        [Task(id="t", prompt="p")], endpoint=EndpointConfig(base_url=sim.base_url, model="m"),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
    )  # fmt: skip
    assert result.ok
    assert result.summary["errors"] == {}


def test_the_progress_line_names_the_stage_before_the_plan() -> None:
    out = io.StringIO()
    with ProgressReporter(Console(file=out, width=200)) as progress:
        progress.stage("starting the local model…")
        progress.plan("ro_1", 4)
    assert out.getvalue().splitlines() == ["starting the local model…", "run ro_1: 4 rollouts"]


def test_ok_needs_one_success_and_no_failed_commit() -> None:
    done = RolloutResult("t", 0, "s0", "completed")
    capped = RolloutResult("t", 1, "s1", "limit_reached")
    unstored = RolloutResult("t", 2, "s2", "error", error_code="store_error", commit_failed=True)
    failed = RolloutResult("t", 3, "s3", "failed", error_code="harness_error")
    assert RunResult("r", [done, failed], {}).ok
    assert RunResult("r", [capped], {}).ok
    assert not RunResult("r", [done, unstored], {}).ok
    assert not RunResult("r", [failed], {}).ok


def test_the_summary_never_folds_the_run_id() -> None:
    run_id = "e389b32c35174e1f956fa3c37f79229a"
    out = io.StringIO()
    render_summary(Console(file=out, width=40), run_id, summarize([]))
    assert f"run {run_id}" in out.getvalue().splitlines()
