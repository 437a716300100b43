"""An endpoint's address: ``base_url`` or ``replicas`` (exactly one), in Python, TOML and flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from rolltap.cli import eval_cmd, gateway_cmd, serve_cmd
from rolltap.cli.main import app, main, register_commands
from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts import RunConfig, load_run_config
from rolltap.serve import ServeConfig

A, B, C = "http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"
#: the fields an endpoint without replicas dumps: those it had before replicas existed,
#: so its identity digest (over the dump) did not change
PLAIN_FIELDS = {
    "name", "dialect", "base_url", "model", "api_key_env", "headers", "timeouts",
    "max_connections", "max_inflight", "inflight_timeout_s", "max_queued", "client",
    "tokenizer", "completions_api", "tool_parser", "template_kwargs", "eos_tokens",
}  # fmt: skip

register_commands()
runner = CliRunner()


def test_a_plain_endpoint_dumps_as_before() -> None:
    plain = EndpointConfig(base_url=A + "/", model="m")
    assert set(plain.model_dump()) == PLAIN_FIELDS
    assert plain.replicas == ()
    assert plain.replica_urls == (A,)
    assert plain.replica_cooloff_s == 10.0


def test_replicas_read_as_their_first_for_base_url_readers() -> None:
    ep = EndpointConfig(replicas=[A + "/", B], model="m", replica_cooloff_s=3)
    assert ep.base_url == A
    assert ep.replicas == ep.replica_urls == (A, B)
    dumped = ep.model_dump(mode="json")
    assert "base_url" not in dumped
    assert (dumped["replicas"], dumped["replica_cooloff_s"]) == ([A, B], 3.0)
    assert EndpointConfig.model_validate(dumped) == ep
    assert EndpointConfig.model_validate_json(ep.model_dump_json()) == ep


def test_identity_covers_the_replicas() -> None:
    two = EndpointConfig(replicas=[A, B], model="m")
    digests = {
        two.identity(credential=None),
        EndpointConfig(replicas=[A, C], model="m").identity(credential=None),
        EndpointConfig(replicas=[B, A], model="m").identity(credential=None),
        EndpointConfig(base_url=A, model="m").identity(credential=None),
    }
    assert len(digests) == 4


def test_one_replica_is_one_endpoint_keyed_like_a_plain_one() -> None:
    ep = EndpointConfig(replicas=[A, B], model="m", api_key_env="K", max_inflight=4)
    one = ep.for_replica(B)
    assert (one.base_url, one.replicas, one.max_inflight, one.api_key_env) == (B, (), 4, "K")
    plain = EndpointConfig(base_url=B, model="m", api_key_env="K", max_inflight=4)
    assert one.identity(credential="k") == plain.identity(credential="k")
    assert plain.for_replica(B) == plain
    with pytest.raises(ConfigError, match="no such replica"):
        ep.for_replica(C)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"base_url": A, "replicas": [B]}, "either base_url or replicas, not both"),
        ({}, "give base_url"),
        ({"replicas": []}, "at least one URL"),
        ({"replicas": A}, "a list of URLs"),
        ({"replicas": [A, "ftp://b"]}, "replicas must start with http"),
        ({"replicas": [A, A + "/"]}, "must not repeat"),
        ({"replicas": [A], "replica_cooloff_s": 0}, "replica_cooloff_s"),
        ({"base_url": "http:///v1"}, "base_url names no host"),
        ({"base_url": "http://h:port/v1"}, "base_url is not a URL"),
        ({"replicas": [A, "https://b:99999"]}, "replicas is not a URL"),
        ({"base_url": A, "headers": {"X-A": "1\r\nX-B: 2"}}, "holds a line break"),
        ({"base_url": A, "headers": {"X A": "1"}}, "not a header name"),
    ],
)
def test_bad_addresses_are_rejected(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        EndpointConfig.model_validate({"model": "m", **fields})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_run_config_toml_names_replicas(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
endpoint = "pool"
replica_cooloff_s = 4
[endpoints.pool]
replicas = ["{A}", "{B}"]
model = "m"
""",
    )
    endpoint = load_run_config(path).endpoint_config()
    assert endpoint is not None
    assert (endpoint.name, endpoint.replicas, endpoint.replica_cooloff_s) == ("pool", (A, B), 4)


def test_run_config_toml_with_both_is_a_config_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
endpoint = "pool"
[endpoints.pool]
base_url = "{C}"
replicas = ["{A}", "{B}"]
model = "m"
""",
    )
    config = load_run_config(path)
    with pytest.raises(ConfigError, match=r"endpoint 'pool'.*either base_url or replicas"):
        config.endpoint_config()


def test_run_config_endpoint_list_is_replicas_and_survives_storage() -> None:
    config = RunConfig(endpoint=[A, B], model="m", max_inflight=2)
    endpoint = config.endpoint_config()
    assert endpoint is not None
    assert (endpoint.replicas, endpoint.model, endpoint.max_inflight) == ((A, B), "m", 2)
    # --resume rebuilds the run from its stored JSON
    stored = orjson.loads(orjson.dumps(config.model_dump(mode="json")))
    assert RunConfig.model_validate(stored).endpoint_config() == endpoint
    single = RunConfig(endpoint=[A]).endpoint_config()
    assert single is not None
    assert (single.base_url, single.replicas) == (A, ())


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [([], "names no URL"), ([A, "pool"], "'pool' is not a URL")],
)
def test_run_config_bad_endpoint_lists(endpoint: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(endpoint=endpoint, endpoints={"pool": {"base_url": C}}).endpoint_config()


def test_serve_toml_names_replicas(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    path.write_text(f'[endpoints.pool]\nreplicas = ["{A}", "{B}"]\nmodel = "m"\n')
    config = ServeConfig.from_toml(path)
    assert config.endpoints[0].replicas == (A, B)
    path.write_text(f'[endpoints.pool]\nbase_url = "{A}"\nreplicas = ["{B}"]\nmodel = "m"\n')
    with pytest.raises(ConfigError, match=r"endpoints\.0.*either base_url or replicas"):
        ServeConfig.from_toml(path)


# -- --endpoint given more than once --------------------------------------------------------


def test_gateway_endpoint_flags_become_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[EndpointConfig | None] = []

    async def fake_serve(endpoint: EndpointConfig | None, *args: object) -> int:
        seen.append(endpoint)
        return 0

    monkeypatch.setattr(gateway_cmd, "_serve", fake_serve)
    args = ["gateway", "--endpoint", A, "--endpoint", B, "--model", "m"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen[0] is not None
    assert seen[0].replicas == (A, B)
    result = runner.invoke(app, ["gateway", "--endpoint", A, "--model", "m"])
    assert result.exit_code == 0, result.output
    assert seen[1] is not None
    assert (seen[1].base_url, seen[1].replicas) == (A, ())


def test_gateway_repeated_endpoint_must_differ(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["gateway", "--endpoint", A, "--endpoint", A, "--model", "m"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error [invalid_config] invalid endpoint: --endpoint:" in err
    assert "must not repeat" in err


def test_serve_endpoint_flags_become_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    async def fake_serve(values: dict[str, Any], config_file: Path | None) -> int:
        seen.append(values)
        return 0

    monkeypatch.setattr(serve_cmd, "_serve", fake_serve)
    args = ["serve", "--endpoint", A, "--endpoint", B, "--endpoint", C, "--model", "m"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen[0]["endpoints"][0].replicas == (A, B, C)


def test_eval_endpoint_flags_become_replicas(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[RunConfig] = []

    async def fake_eval(config: RunConfig, *args: object) -> Any:
        seen.append(config)
        raise ConfigError("stop here")

    monkeypatch.setattr(eval_cmd, "_eval", fake_eval)
    config = write(tmp_path, f'endpoint = "{C}"\nmodel = "m"\n')
    args = ["eval", "t.jsonl", "--config", str(config), "--endpoint", A, "--endpoint", B]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output  # the ConfigError above
    assert seen[0].endpoint == [A, B]  # the flags win over the file
    endpoint = seen[0].endpoint_config()
    assert endpoint is not None
    assert endpoint.replicas == (A, B)
    runner.invoke(app, ["eval", "t.jsonl", "--endpoint", A])
    assert seen[1].endpoint == A
    runner.invoke(app, ["eval", "t.jsonl", "--endpoint", A, "--endpoint", "pool"])
    assert seen[2].endpoint == "pool"  # a name given after a URL overrides it, as before
