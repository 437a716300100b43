"""``rolltap eval --retry-failed RUN`` (``--retry-codes``, ``--attempt-policy``) and ``rolltap
runs show RUN`` as a user runs them: the flags, their mistakes, what they print."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from clikit import TASKS, arolltap, assert_one_line_error, rolltap
from flagkit import eval_configs
from rolltap.cli.main import app, register_commands
from rolltap.rollouts import load_run_config
from rolltap.sim import SimConfig, Simulator

EVAL = ("eval", TASKS, "--harness", "chat", "--endpoint", "http://127.0.0.1:1/v1")


def test_the_flags_are_run_config_fields(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    register_commands()
    seen = eval_configs(monkeypatch)
    args = ["eval", "t.jsonl", "--retry-codes", "upstream_timeout,upstream_http_error",
            "--retry-codes", "worker_lost", "--attempt-policy", "last"]  # fmt: skip
    assert CliRunner().invoke(app, args).exit_code == 2  # stopped where it would run
    assert seen[0].retry_codes == ["upstream_timeout", "upstream_http_error", "worker_lost"]
    assert seen[0].attempt_policy == "last"
    CliRunner().invoke(app, ["eval", "t.jsonl"])
    assert (seen[1].retry_codes, seen[1].attempt_policy) == (None, "best")  # the defaults
    toml = tmp_path / "run.toml"
    toml.write_text('attempt_policy = "last"\nretry_codes = ["all"]\n')
    assert (load_run_config(toml).attempt_policy, load_run_config(toml).retry_codes) == (
        "last", None,
    )  # fmt: skip


def test_resume_and_retry_failed_together_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    outcome = rolltap("eval", "--resume", "abcd", "--retry-failed", "abcd", "--store", url)
    line = assert_one_line_error(outcome, 2, "usage_error")
    assert "--resume and --retry-failed: give one" in line
    outcome = rolltap("eval", "--resume", "abcd", "--attempt-policy", "last", "--store", url)
    assert "go with --retry-failed" in assert_one_line_error(outcome, 2, "usage_error")
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--retry-codes", "upstream_status"], "did you mean upstream_http_error"),
        (["--retry-codes", "upstream_timeout,nope"], "unknown error code 'nope'"),
        (["--retry-codes", ","], "name at least one error code"),
    ],
)
def test_unknown_retry_codes_are_named_with_the_known_ones(
    tmp_path: Path, flags: list[str], names: str
) -> None:
    outcome = rolltap(*EVAL, "--store", f"sqlite:///{tmp_path / 'runs.db'}", *flags)
    line = assert_one_line_error(outcome, 2, "invalid_config")
    assert "--retry-codes: " in line and names in line
    if "nope" in names:
        assert "known codes: " in line and "upstream_http_error" in line
    assert not (tmp_path / "runs.db").exists()


def test_an_unknown_attempt_policy_is_a_usage_error() -> None:
    line = assert_one_line_error(rolltap(*EVAL, "--attempt-policy", "worst"), 2, "usage_error")
    assert "'worst' is not one of 'best', 'last'" in line


def test_retry_of_an_unknown_run_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert_one_line_error(rolltap("runs", "list", "--store", url), 1, "store_not_found")
    rolltap("db", "upgrade", "--store", url)
    line = assert_one_line_error(rolltap("eval", "--retry-failed", "feed", "--store", url), 1,
                                 "store_not_found")  # fmt: skip
    assert "feed" in line


async def test_retry_failed_from_the_command_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "prompt": f"p{i}", "info": {"regex": "."}} for i in range(10)]
    tasks.write_bytes(b"\n".join(orjson.dumps(row) for row in rows))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Simulator(SimConfig(seed=1, faults=("status=500@0.3",))) as flaky:
        port = flaky.url.rsplit(":", 1)[1]
        first = await arolltap(
            "eval", str(tasks), "--harness", "chat", "--endpoint", flaky.base_url, "--model",
            "m", "-r", "2", "-c", "4", "--reward", "regex", "--store", url, "--json",
        )  # fmt: skip
    assert first.code == 0, first.output
    run_id = orjson.loads(first.stdout)["run_id"]
    assert orjson.loads(first.stdout)["statuses"] == {"completed": 13, "failed": 7}

    none = await arolltap("eval", "--retry-failed", run_id[:8], "--retry-codes",
                          "upstream_timeout", "--store", url, "--json")  # fmt: skip
    assert none.code == 0, none.output
    assert orjson.loads(none.stdout)["retried"] == 0
    assert (
        f"nothing to retry: no rollout of {run_id} ended failed with upstream_timeout "
        "(its failed rollouts: upstream_http_error × 7)"
    ) in none.stderr

    async with Simulator(SimConfig(seed=1), port=int(port)) as healthy:
        again = await arolltap("eval", "--retry-failed", run_id, "--attempt-policy", "last",
                               "--store", url, "--json")  # fmt: skip
        assert healthy.stats.requests == 7
    assert again.code == 0, again.output
    assert f"run {run_id}: 7 rollouts" in again.stderr
    summary = orjson.loads(again.stdout)
    assert (summary["retried"], summary["rollouts"], summary["statuses"]) == (
        7, 20, {"completed": 20},
    )  # fmt: skip
    assert summary["attempts"] == {
        "policy": "last", "sessions": 27, "slots": 20, "retried": 7, "max_attempt": 1,
    }  # fmt: skip

    shown = await arolltap("runs", "show", run_id[:8], "--store", url, "--json")
    doc = orjson.loads(shown.stdout)
    assert doc["summary"]["attempts"] == summary["attempts"]
    retries = [s for s in doc["sessions"] if s["attempt"] == 1]
    firsts = {s["id"]: s for s in doc["sessions"]}
    assert len(retries) == 7
    for session in retries:
        repeated = firsts[session["retry_of"]]
        assert repeated["status"] == "failed" and repeated["error_code"] == "upstream_http_error"
        assert (repeated["task_id"], repeated["sample"]) == (session["task_id"], session["sample"])
    table = await arolltap("runs", "show", run_id, "--store", url, env={"COLUMNS": "200"})
    assert "7 of 20 rollouts retried, 27 sessions, up to attempt 1; counting the last" in (
        table.stdout
    )
    assert retries[0]["retry_of"] in table.stdout
    listed = await arolltap("runs", "list", "--store", url, env={"COLUMNS": "200"})
    assert "7 of 20" in listed.stdout
