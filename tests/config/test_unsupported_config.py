"""``unsupported = "drop" | "refuse"``: an endpoint field outside its identity, a run-config
field stored with the run, and ``--unsupported`` on ``eval``, ``gateway`` and ``serve``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from clikit import assert_one_line_error, rolltap
from flagkit import eval_configs, served
from rolltap.cli.main import app, register_commands
from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts import RunConfig, load_run_config

A = "http://a:8000/v1"
register_commands()
runner = CliRunner()


def test_the_policy_is_no_part_of_the_identity() -> None:
    drop = EndpointConfig(base_url=A, model="m")
    refuse = EndpointConfig(base_url=A, model="m", unsupported="refuse")
    assert drop.unsupported == "drop" and "unsupported" not in drop.model_dump()
    assert refuse.identity(credential=None) == drop.identity(credential=None)  # one client
    assert EndpointConfig.model_validate(refuse.model_dump()) == refuse  # stored, it stays


def test_the_run_config_field_reaches_the_endpoint_and_survives_a_resume(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(f'endpoint = "{A}"\nunsupported = "refuse"\n')
    config = load_run_config(path)
    endpoint = config.endpoint_config()
    assert endpoint is not None and endpoint.unsupported == "refuse"
    # what --resume does with the stored config (rollouts.api.stored_run_config)
    stored = RunConfig.model_validate(config.model_dump()).merged({})
    again = stored.endpoint_config()
    assert again is not None and again.unsupported == "refuse"
    named = RunConfig(endpoint="v", endpoints={"v": {"base_url": A, "model": "m",
                                                     "unsupported": "refuse"}})  # fmt: skip
    got = named.endpoint_config()
    assert got is not None and got.unsupported == "refuse"
    path.write_text(f'endpoint = "{A}"\nunsupported = "dorp"\n')
    with pytest.raises(ConfigError, match="unsupported"):
        load_run_config(path)


def test_eval_takes_the_flag_as_a_run_config_field(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = eval_configs(monkeypatch)
    result = runner.invoke(app, ["eval", "t.jsonl", "--endpoint", A, "--unsupported", "refuse"])
    assert result.exit_code == 2, result.output  # the ConfigError above
    assert seen[0].model_dump()["unsupported"] == "refuse"  # stored with the run
    endpoint = seen[0].endpoint_config()
    assert endpoint is not None and endpoint.unsupported == "refuse"
    runner.invoke(app, ["eval", "t.jsonl", "--endpoint", A])
    assert seen[1].unsupported is None  # not given: the endpoint's own


def test_gateway_and_serve_take_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = served(monkeypatch)
    for command in ("gateway", "serve"):
        args = [command, "--endpoint", A, "--model", "m", "--unsupported", "refuse"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        result = runner.invoke(app, [command, "--unsupported", "refuse"])  # the local model
        assert result.exit_code == 0, result.output
    assert [s.endpoint.unsupported if s.endpoint else None for s in seen] == ["refuse", None] * 2
    assert [s.local_fields for s in seen] == [None, {"unsupported": "refuse"}] * 2


@pytest.mark.parametrize("command", ["eval", "gateway", "serve"])
def test_a_typo_is_one_usage_error(command: str) -> None:
    outcome = rolltap(command, "--endpoint", A, "--model", "m", "--unsupported", "dorp")
    line = assert_one_line_error(outcome, 2, "invalid_config")
    assert line.endswith("--unsupported must be drop or refuse (got 'dorp')")


def test_serve_with_a_config_file_wants_the_policy_in_its_endpoints(tmp_path: Path) -> None:
    config = tmp_path / "serve.toml"
    config.write_text(f'[endpoints.a]\nbase_url = "{A}"\nmodel = "m"\n')
    outcome = rolltap("serve", "--config", str(config), "--unsupported", "refuse")
    line = assert_one_line_error(outcome, 2, "invalid_config")
    assert "set unsupported in each [endpoints.NAME] table" in line
