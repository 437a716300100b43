"""``capture_tokens`` / ``capture_logprobs``: endpoint fields, run-config fields and flags on
``eval``, ``gateway`` and ``serve``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from flagkit import eval_configs, served
from rolltap.cli.main import app, register_commands
from rolltap.config import EndpointConfig
from rolltap.rollouts import RunConfig, load_run_config

A = "http://a:8000/v1"
register_commands()
runner = CliRunner()


def test_capture_off_keeps_the_identity_of_an_endpoint_from_before() -> None:
    plain = EndpointConfig(base_url=A, model="m")
    off = EndpointConfig(base_url=A, model="m", capture_tokens=False)
    on = EndpointConfig(base_url=A, model="m", capture_tokens=True)
    assert "capture_tokens" not in plain.model_dump()
    assert plain.identity(credential=None) == off.identity(credential=None)
    assert on.identity(credential=None) != plain.identity(credential=None)
    assert EndpointConfig.model_validate(on.model_dump()) == on


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"capture_logprobs": True}, "capture_logprobs needs capture_tokens"),
        ({"capture_tokens": True, "dialect": "messages"}, "needs a chat relay endpoint"),
        ({"capture_tokens": True, "client": "tokens", "tokenizer": "t"}, "chat relay"),
    ],
)
def test_capture_needs_a_chat_relay(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        EndpointConfig(base_url=A, model="m", **fields)


def test_the_run_config_fields_reach_the_endpoint(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(f'endpoint = "{A}"\ncapture_tokens = true\ncapture_logprobs = true\n')
    endpoint = load_run_config(path).endpoint_config()
    assert endpoint is not None
    assert (endpoint.capture_tokens, endpoint.capture_logprobs) == (True, True)
    named = RunConfig(endpoint="v", endpoints={"v": {"base_url": A, "model": "m",
                                                     "capture_tokens": True}})  # fmt: skip
    got = named.endpoint_config()
    assert got is not None and got.capture_tokens and not got.capture_logprobs


def test_eval_flags_are_run_config_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = eval_configs(monkeypatch)
    args = ["eval", "t.jsonl", "--endpoint", A, "--capture-tokens", "--capture-logprobs"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output  # the ConfigError above
    assert (seen[0].capture_tokens, seen[0].capture_logprobs) == (True, True)
    assert seen[0].model_dump()["capture_tokens"] is True  # stored with the run
    runner.invoke(app, ["eval", "t.jsonl", "--endpoint", A])
    assert seen[1].capture_tokens is None  # not given: the endpoint's own


def test_gateway_and_serve_take_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = served(monkeypatch)
    for command in ("gateway", "serve"):
        result = runner.invoke(app, [command, "--endpoint", A, "--model", "m", "--capture-tokens"])
        assert result.exit_code == 0, result.output
    assert [s.endpoint is not None and s.endpoint.capture_tokens for s in seen] == [True, True]
    # the local model (llama-server) returns no ids: refused, not silently ignored
    result = runner.invoke(app, ["gateway", "--capture-tokens"])
    assert result.exit_code == 2 and "--capture-tokens needs --endpoint" in result.output
