"""``rolltap score RUN --reward …`` and ``--scoring`` on ``runs show`` / ``runs compare``, as
a user runs them: the summary they print, the scoring they read, their mistakes."""

from __future__ import annotations

from pathlib import Path

import orjson

from clikit import TASKS, arolltap, assert_one_line_error, rolltap
from rolltap.sim import SimConfig, Simulator


async def _run(url: str) -> str:
    async with Simulator(SimConfig(seed=1)) as sim:
        done = await arolltap(
            "eval", TASKS, "--harness", "chat", "--endpoint", sim.base_url, "--model", "m",
            "-r", "2", "--reward", "prefix", "--store", url, "--json",
        )  # fmt: skip
    assert done.code == 0, done.output
    run_id: str = orjson.loads(done.stdout)["run_id"]
    return run_id


async def test_score_then_read_the_run_under_each_scoring(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = await _run(url)
    scored = await arolltap("score", run_id[:8], "--reward", "exact", "--name", "strict",
                            "--store", url, "--json")  # fmt: skip
    assert scored.code == 0, scored.output
    assert f"score run {run_id}: 16 rollouts" in scored.stderr
    doc = orjson.loads(scored.stdout)
    assert doc["run_id"] == run_id and doc["scoring"]["name"] == "strict"
    assert doc["scoring"]["rewards"] == [{"name": "exact", "weight": 1.0}]
    assert doc["scoring"]["summary"]["rollouts"] == 16
    table = await arolltap("score", run_id, "--reward", "contains=2", "--store", url,
                           env={"COLUMNS": "200"})  # fmt: skip
    assert table.code == 0, table.output
    assert "contains=2 (" in table.stdout and "2 scoring(s)" in table.stdout
    assert f"rolltap runs show {run_id[:8]} --scoring original" in table.stdout

    latest = orjson.loads((await arolltap("runs", "show", run_id, "--store", url,
                                          "--json")).stdout)  # fmt: skip
    assert latest["summary"]["scoring"]["label"] == "contains=2"
    strict = orjson.loads((await arolltap("runs", "show", run_id, "--scoring", "strict",
                                          "--store", url, "--json")).stdout)  # fmt: skip
    assert strict["summary"]["scoring"]["name"] == "strict"
    assert strict["summary"]["reward"] == doc["scoring"]["summary"]["reward"]
    compared = await arolltap("runs", "compare", run_id, run_id, "--scoring", "original",
                              "--scoring", "strict", "--store", url, "--json")  # fmt: skip
    both = orjson.loads(compared.stdout)
    assert [s["scoring"]["label"] for s in both.values()] == ["original", "strict"]
    assert list(both) == [f"{run_id[:12]} (original)", f"{run_id[:12]} (strict)"]


async def test_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = await _run(url)
    line = assert_one_line_error(rolltap("score", run_id, "--store", url), 2, "invalid_config")
    assert "name at least one reward" in line
    typo = rolltap("score", run_id, "--reward", "contians", "--store", url)
    assert "unknown reward 'contians'" in assert_one_line_error(typo, 2, "invalid_config")
    missing = rolltap("score", "feed", "--reward", "exact", "--store", url)
    assert "no run 'feed'" in assert_one_line_error(missing, 1, "store_not_found")
    shown = rolltap("runs", "show", run_id, "--scoring", "nope", "--store", url)
    assert "no scoring named 'nope'" in assert_one_line_error(shown, 1, "store_not_found")
    three = rolltap("runs", "compare", run_id, run_id, *["--scoring", "a"] * 3, "--store", url)
    assert "once for both runs or twice" in assert_one_line_error(three, 2, "usage_error")
    listed = orjson.loads(rolltap("runs", "show", run_id, "--store", url, "--json").stdout)
    assert "scoring" not in listed["summary"]  # nothing was scored
