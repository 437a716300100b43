"""``tool_parser`` / ``reasoning_parser``: endpoint fields, run-config (TOML) fields stored
with the run, and ``--tool-parser`` / ``--reasoning-parser`` on eval, gateway and serve."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagkit import eval_configs, served
from rolltap.cli.main import app, register_commands
from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts import RunConfig, load_run_config
from rolltap.serve import ServeConfig

URL = "http://127.0.0.1:9/v1"
FLAGS = ["--tool-parser", "openai", "--reasoning-parser", "harmony"]

register_commands()
runner = CliRunner()


def test_the_endpoint_dumps_reasoning_parser_only_when_set() -> None:
    plain = EndpointConfig(base_url=URL, model="m")
    assert "reasoning_parser" not in plain.model_dump()  # identity digests as before
    chosen = EndpointConfig(base_url=URL, model="m", tool_parser="mistral", reasoning_parser="none")
    dumped = chosen.model_dump(mode="json")
    assert (dumped["tool_parser"], dumped["reasoning_parser"]) == ("mistral", "none")
    assert EndpointConfig.model_validate(dumped) == chosen
    assert chosen.identity(credential=None) != plain.identity(credential=None)


def test_run_config_fields_reach_the_endpoint_and_are_stored(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        f'endpoint = "train"\ntool_parser = "deepseek_v3"\n'
        f'[endpoints.train]\nbase_url = "{URL}"\nmodel = "m"\nreasoning_parser = "none"\n'
    )
    config = load_run_config(path)
    endpoint = config.endpoint_config()
    assert endpoint is not None
    assert (endpoint.tool_parser, endpoint.reasoning_parser) == ("deepseek_v3", "none")
    stored = RunConfig.model_validate(config.model_dump(mode="json"))  # the run row's JSON
    assert stored.tool_parser == "deepseek_v3"
    assert stored.endpoint_config() == endpoint


def test_eval_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = eval_configs(monkeypatch)
    result = runner.invoke(app, ["eval", "t.jsonl", "--endpoint", URL, *FLAGS])
    assert result.exit_code == 2, result.output  # the ConfigError above
    endpoint = seen[0].endpoint_config()
    assert endpoint is not None
    assert (endpoint.tool_parser, endpoint.reasoning_parser) == ("openai", "harmony")


def test_gateway_and_serve_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = served(monkeypatch)
    for command in ("gateway", "serve"):
        result = runner.invoke(app, [command, "--endpoint", URL, "--model", "m", *FLAGS])
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["gateway", "--endpoint", URL, "--model", "m"])
    assert result.exit_code == 0, result.output
    parsers = [(s.endpoint.tool_parser, s.endpoint.reasoning_parser) for s in seen if s.endpoint]
    assert parsers == [("openai", "harmony"), ("openai", "harmony"), ("hermes", None)]


def test_serve_refuses_an_unknown_parser_before_any_worker_starts(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    table = f'[endpoints.t]\nbase_url = "{URL}"\nmodel = "m"\nclient = "tokens"\n'
    path.write_text(table + 'tokenizer = "/x"\ntool_parser = "nope"\n')
    with pytest.raises(ConfigError, match="unknown tool-call parser 'nope'"):
        ServeConfig.from_toml(path)
    path.write_text(table + 'tokenizer = "/x"\ntool_parser = "openai"\n')
    assert ServeConfig.from_toml(path).endpoints[0].tool_parser == "openai"
