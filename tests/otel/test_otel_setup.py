"""Turning tracing on and off: flags, environment, the missing extra, the OTLP export."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from rolltap.config import EndpointConfig
from rolltap.errors import MissingExtraError
from rolltap.otel import otel_enabled, otel_requested
from rolltap.otel.setup import ENDPOINT_VARS, _warn_once
from rolltap.rollouts import Task
from rolltap.serve import ServeConfig
from rolltap.serve.supervisor.supervisor import Supervisor
from rolltap.sim import Simulator
from rolltap.store import Store
from runkit import evaluate
from upstreams import serving

#: what the extra's absence looks like to an import
BLOCKED = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*ENDPOINT_VARS, "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def without_extra(no_otel_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in BLOCKED:
        no_otel_env.setitem(sys.modules, name, None)
    _warn_once.cache_clear()
    return no_otel_env


def test_flag_wins_else_an_endpoint_in_the_environment(no_otel_env: pytest.MonkeyPatch) -> None:
    assert (otel_requested(None), otel_requested(True), otel_requested(False)) == (
        False, True, False,
    )  # fmt: skip
    no_otel_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert otel_requested(None) and not otel_requested(False)
    no_otel_env.setenv("OTEL_SDK_DISABLED", "true")
    assert not otel_requested(None) and otel_requested(True)
    no_otel_env.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    no_otel_env.delenv("OTEL_SDK_DISABLED")
    no_otel_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces")
    assert otel_requested(None)


def test_otel_without_the_extra_is_a_missing_extra_error(
    without_extra: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(MissingExtraError) as info:
        otel_enabled(True)
    assert info.value.code == "missing_extra"
    assert "pip install 'rolltap[otel]'" in info.value.message
    assert not otel_enabled(None) and not otel_enabled(False)
    assert caplog.records == []  # nothing asked for tracing: nothing to warn about
    # an endpoint meant for other programs must not break rolltap: a warning only
    without_extra.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    with caplog.at_level(logging.WARNING, logger="rolltap.otel"):
        assert not otel_enabled(None)
    assert "rolltap[otel]" in caplog.text


async def test_eval_with_otel_and_no_extra_fails_before_creating_a_run(
    without_extra: pytest.MonkeyPatch, sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    with pytest.raises(MissingExtraError):
        await evaluate([Task(id="t", prompt="p")], endpoint=sim.base_url, store=url, otel=True)
    async with await Store.open(url) as store:
        assert await store.list_runs() == []


async def test_tracing_off_never_imports_opentelemetry(sim: Simulator) -> None:
    """A whole call through a gateway the way eval builds it, tracing off, in a fresh
    interpreter: not one OpenTelemetry module gets loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OFF_SCRIPT, sim.base_url, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert orjson.loads(out) == {"status": 200, "otel_modules": []}


OFF_SCRIPT = """
import asyncio, sys
import aiohttp, orjson
import rolltap, rolltap.cli.main
from rolltap.otel import open_tracer
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway

async def main():
    endpoint = EndpointConfig(base_url=sys.argv[1], model="m")
    tracing = open_tracer(None)
    async with tracing as tracer, Gateway(endpoint, GatewaySettings(), tracer=tracer) as gw:
        assert tracer is None and gw.tracer is None
        rollout = await gw.register()
        urls = gw.describe(rollout)
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        auth = {"Authorization": "Bearer " + urls["api_key"]}
        async with aiohttp.ClientSession() as http:
            url = urls["openai_base_url"] + "/chat/completions"
            async with http.post(url, json=body, headers=auth) as resp:
                status = resp.status
        await gw.unregister(rollout.id)
    return status

status = asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
print(orjson.dumps({"status": status, "otel_modules": loaded}).decode())
"""


@pytest.fixture
async def collector() -> AsyncIterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A stand-in OTLP/HTTP collector: every request's path, content type and body."""
    received: list[tuple[str, str, bytes]] = []

    async def receive(request: web.Request) -> web.Response:
        received.append((request.path, request.content_type, await request.read()))
        return web.Response(status=200, content_type="application/x-protobuf", body=b"")

    app = web.Application()
    app.router.add_post("/{tail:.*}", receive)
    async with serving(app) as url:
        yield url, received


async def test_eval_otel_exports_spans_over_otlp_http(
    sim: Simulator, tmp_path: Path, collector: tuple[str, list[tuple[str, str, bytes]]]
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    endpoint, received = collector
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b"\n".join(orjson.dumps({"prompt": f"p{i}"}) for i in range(2)))
    url = f"sqlite:///{tmp_path}/runs.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"PYTHONPATH": os.pathsep.join(sys.path), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rolltap", "eval", str(tasks), "--endpoint", sim.base_url,
        "--model", "sim-model", "--harness", "chat", "--store", url, "--otel", "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    run_id = orjson.loads(out)["run_id"]
    # the exporter's last batch goes out before the process exits
    assert received, "no OTLP export arrived"
    assert {(path, ctype) for path, ctype, _ in received} == {
        ("/v1/traces", "application/x-protobuf")
    }
    spans = []
    for _, _, body in received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "rolltap"
            spans += [s for scope in resource.scope_spans for s in scope.spans]
    assert sorted(s.name for s in spans) == ["chat sim-model"] * 2 + ["invoke_agent"] * 2
    for span in spans:
        found = {a.key: a.value.string_value for a in span.attributes}
        assert found["rolltap.run.id"] == run_id
    # the flag is part of the stored run: --resume traces too
    async with await Store.open(url) as store:
        stored = (await store.get_run(run_id)).config["run"]
    assert stored["otel"] is True and stored["otel_content"] is False


SERVE_ENDPOINTS = [EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m")]


def test_serve_without_the_extra_fails_the_supervisor(without_extra: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingExtraError):
        Supervisor(ServeConfig(endpoints=SERVE_ENDPOINTS, otel=True))
    assert not Supervisor(ServeConfig(endpoints=SERVE_ENDPOINTS))._otel


def test_serve_decides_once_for_its_workers(no_otel_env: pytest.MonkeyPatch) -> None:
    config = ServeConfig.build({"endpoints": SERVE_ENDPOINTS, "otel_content": True})
    assert not Supervisor(config)._otel
    no_otel_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert Supervisor(config)._otel and config.otel_content
    assert not Supervisor(config.model_copy(update={"otel": False}))._otel
