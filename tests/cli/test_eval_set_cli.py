"""``rolltap eval-set`` and ``rolltap sets`` as a user runs them: a set stopped by Ctrl-C and
resumed, its table, ``runs compare --sets``, deleting it, and the mistakes."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson

from clikit import REPO, argv, arolltap, assert_one_line_error, cli_env, rolltap
from rolltap.cli.compare_sets import pair_runs
from rolltap.evalset import SetRun
from rolltap.sim import SimConfig, Simulator


def _set(tmp_path: Path, sim: Simulator, r: int) -> Path:
    text = (REPO / "examples" / "eval-set.toml").read_text()
    text = text.replace("http://127.0.0.1:8000/v1", sim.base_url)
    text = text.replace('"patterns.jsonl"', f'"{REPO / "examples" / "patterns.jsonl"}"')
    path = tmp_path / "set.toml"
    path.write_text(text.replace("r = 2\n", f"r = {r}\n").replace("c = 8", "c = 2"))
    return path


async def _interrupted(path: Path, url: str) -> tuple[int, str]:
    """Run the set, Ctrl-C once its second run has begun; (exit code, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *argv("eval-set", str(path), "--store", url), env=cli_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = []
    async for raw in proc.stderr:
        seen.append(raw.decode())
        if "(#2 contains)" in seen[-1]:
            proc.send_signal(signal.SIGINT)
            break
    rest = await proc.stderr.read()
    await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, "".join(seen) + rest.decode()


async def test_a_set_stopped_by_ctrl_c_is_resumed_then_compared_and_deleted(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Simulator(SimConfig(seed=1)) as sim:
        code, err = await _interrupted(_set(tmp_path, sim, r=8), url)
        assert code == 130, err
        assert "stopping: no new run starts" in err
        resume = err.split("rolltap eval-set --resume ")[1].split()[0]
        shown = orjson.loads((await arolltap("sets", "show", resume[:8], "--store", url,
                                             "--json")).stdout)  # fmt: skip
        assert [r["run_id"] is None for r in shown["runs"]] == [False, False, True]
        done = await arolltap("eval-set", "--resume", resume[:8], "--store", url, "--json")
        assert done.code == 0, done.output
        again = await arolltap("eval-set", str(_set(tmp_path, sim, r=2)), "--store", url,
                               "--json")  # fmt: skip
        assert again.code == 0, again.output
    first, second = orjson.loads(done.stdout), orjson.loads(again.stdout)
    assert first["set_id"] == resume and not first["interrupted"]
    assert [r["summary"]["rollouts"] for r in first["runs"]] == [64, 64, 32]
    assert first["summary"]["rollouts"] == 160

    table = await arolltap("sets", "show", resume, "--store", url, env={"COLUMNS": "120"})
    assert "total" in table.stdout and "160" in table.stdout and resume in table.stdout
    listed = (await arolltap("sets", "list", "--store", url)).stdout
    assert f"{resume}  patterns  3/3 runs" in listed
    compared = await arolltap("runs", "compare", "--sets", resume, second["set_id"],
                              "--store", url, "--json")  # fmt: skip
    pairs = orjson.loads(compared.stdout)
    assert [(p["a"]["name"], p["b"]["name"]) for p in pairs["runs"]] == [
        ("prefix", "prefix"), ("contains", "contains"), ("exact-4", "exact-4"),
    ]  # fmt: skip
    assert pairs["total"]["b"]["rollouts"] == 64
    gone = await arolltap("sets", "delete", resume, "--yes", "--store", url)
    assert gone.code == 0 and "160 session(s)" in gone.stdout
    listed = (await arolltap("runs", "list", "--store", url, "--json")).stdout
    assert {orjson.loads(line)["set_id"] for line in listed.splitlines()} == {second["set_id"]}


def test_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    line = assert_one_line_error(rolltap("eval-set", "--store", url), 2, "usage_error")
    assert "give a set file, or --resume SET" in line
    missing = rolltap("eval-set", str(tmp_path / "nope.toml"), "--store", url)
    assert "cannot read eval set" in assert_one_line_error(missing, 2, "invalid_config")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[runs]]\ntasks = "t.jsonl"\nrewrads = ["exact"]\n')
    line = assert_one_line_error(rolltap("eval-set", str(bad), "--store", url), 2,
                                 "invalid_config")  # fmt: skip
    assert "runs[0]: rewrads: Extra inputs are not permitted" in line
    assert "rewrads: did you mean 'rewards'?" in line
    assert not (tmp_path / "runs.db").exists()  # nothing stored before the file is right
    rolltap("db", "upgrade", "--store", url)
    unknown = rolltap("eval-set", "--resume", "feed", "--store", url)
    assert "no eval set 'feed'" in assert_one_line_error(unknown, 1, "store_not_found")
    both = rolltap("runs", "compare", "--sets", "a", "b", "--scoring", "x", "--store", url)
    assert "no --scoring" in assert_one_line_error(both, 2, "usage_error")


def test_compare_sets_pairs_runs_by_name_before_place() -> None:
    a = [SetRun(0, "p"), SetRun(1, "q"), SetRun(2, "s")]
    b = [SetRun(0, "q"), SetRun(1, "r"), SetRun(2, "t"), SetRun(3, "u")]
    pairs = [(x and x.name, y and y.name) for x, y in pair_runs(a, b)]
    # q finds q by name though p comes first and q is in p's place (p, whose place is
    # taken, is compared with nothing); s takes t by place; r and u have no partner
    assert pairs == [("p", None), ("q", "q"), ("s", "t"), (None, "r"), (None, "u")]
