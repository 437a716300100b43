"""Endpoint configs, identity digests, settings and URL joining."""

from __future__ import annotations

import pytest

from rolltap.clients import join_url
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ConfigError

BASE = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="RT_TEST_KEY")


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        ("https://h/api/v1", "/v1/chat/completions", "https://h/api/v1/chat/completions"),
        ("https://h/api/v1/", "/v1/messages", "https://h/api/v1/messages"),
        ("https://api.anthropic.com", "/v1/messages", "https://api.anthropic.com/v1/messages"),
        ("https://h/chat", "/v1/chat/completions", "https://h/chat/v1/chat/completions"),
        (
            "https://h/openai/v1beta",
            "/v1/chat/completions",
            "https://h/openai/v1beta/chat/completions",
        ),
        ("http://h:8080", "/health", "http://h:8080/health"),
    ],
)
def test_join_url(base: str, path: str, expected: str) -> None:
    assert join_url(base, path) == expected


def test_identity_is_stable_and_separates_users_and_credentials() -> None:
    same = EndpointConfig(base_url="http://127.0.0.1:9/v1/", model="m", api_key_env="RT_TEST_KEY")
    assert BASE.identity(credential="k1") == same.identity(credential="k1")
    digests = {
        BASE.identity(credential="k1"),
        BASE.identity(credential="k2"),
        BASE.identity(credential="k1", user="alice"),
        BASE.identity(credential="k1", user="bob"),
        BASE.model_copy(update={"model": "other"}).identity(credential="k1"),
    }
    assert len(digests) == 5
    assert all(len(d) == 64 and "k1" not in d for d in digests)


def test_credential_comes_from_the_named_variable_and_is_never_in_the_config() -> None:
    assert BASE.resolve_credential({"RT_TEST_KEY": "secret"}) == "secret"
    with pytest.raises(ConfigError, match="RT_TEST_KEY is not set"):
        BASE.resolve_credential({})
    assert "secret" not in BASE.model_dump_json()


def test_bad_endpoint_is_rejected() -> None:
    with pytest.raises(ValueError, match="base_url"):
        EndpointConfig(base_url="ftp://x", model="m")
    with pytest.raises(ValueError, match="max_connections"):
        EndpointConfig(base_url="http://x", model="m", max_connections=0)


def test_settings_from_env_and_overrides() -> None:
    env = {"ROLLTAP_MULTIPLEX": "8", "ROLLTAP_ADMIN_TOKEN": "s3cr3t", "ROLLTAP_PORT": "1234"}
    settings = GatewaySettings.from_env(env, port=99)
    assert (settings.multiplex, settings.admin_token, settings.port) == (8, "s3cr3t", 99)
    assert "s3cr3t" not in repr(settings)
    with pytest.raises(ConfigError, match="multiplex"):
        GatewaySettings.from_env({"ROLLTAP_MULTIPLEX": "zero"})


def test_settings_from_toml(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "rolltap.toml"  # type: ignore[operator]
    path.write_text("[gateway]\nmultiplex = 4\nmax_model_clients = 2\n")
    settings = GatewaySettings.from_toml(path)
    assert (settings.multiplex, settings.max_model_clients) == (4, 2)
    path.write_text("[gateway]\nmultiplex = -1\n")
    with pytest.raises(ConfigError, match="multiplex"):
        GatewaySettings.from_toml(path)
