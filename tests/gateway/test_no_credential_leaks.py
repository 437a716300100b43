"""A known upstream key never shows up in a log, event, metric, stat or error body."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import pytest

from clikit import TASKS, arolltap
from helpers import ADMIN_HEADERS, ADMIN_TOKEN, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store

KEY = "sk-test-LEAK-1234567890"
KEY_ENV = "ROLLTAP_TEST_LEAK_KEY"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def assert_no_key(where: str, text: str | bytes) -> None:
    # the key, and its distinctive middle in case of partial masking or re-encoding
    for needle in (KEY, "LEAK-1234567890"):
        data = text if isinstance(text, bytes) else text.encode()
        assert needle.encode() not in data, f"the upstream key leaked into {where}"


def store_files(path: Path) -> list[Path]:
    return [p for p in path.parent.iterdir() if p.name.startswith(path.name)]


async def test_gateway_logs_events_metrics_and_errors_hold_no_upstream_key(
    sim: Simulator,
    http: aiohttp.ClientSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "leak.db"
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", api_key_env=KEY_ENV)
    seen: list[tuple[str, bytes]] = []
    async with await Store.open(f"sqlite:///{db}") as store:
        run = await store.create_run("leak")
        async with (
            StoreRecorder(store, run.id) as recorder,
            Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN), observers=[recorder]) as gw,
        ):
            rollout = await register(http, gw, user="u")
            async with openai_client(rollout) as client:
                await client.chat.completions.create(**BODY)  # type: ignore[call-overload]
                stream = await client.chat.completions.create(**BODY, stream=True)  # type: ignore[call-overload]
                async for _ in stream:
                    pass
            # the key was really sent upstream: otherwise the test proves nothing
            assert sim.stats.last_request_headers["authorization"] == f"Bearer {KEY}"
            url = rollout["openai_base_url"] + "/chat/completions"
            good = {"Authorization": f"Bearer {rollout['api_key']}"}
            calls = [
                (url, {**good, "x-sim-fault": "status=500"}, 500),
                (url, {**good, "x-sim-fault": "status=401"}, 401),
                (rollout["anthropic_base_url"] + "/v1/messages",
                 {**good, "x-sim-fault": "status=401"}, 401),
                (url, {"Authorization": "Bearer wrong"}, 401),
            ]  # fmt: skip
            for target, headers, status in calls:
                body = {**BODY, "max_tokens": 8}
                async with http.post(target, json=body, headers=headers) as resp:
                    assert resp.status == status
                    seen.append((f"error body {status} {target}", await resp.read()))
            admin = gw.admin_url
            async with http.get(admin + "/stats", headers={"Authorization": "Bearer no"}) as resp:
                assert resp.status == 401
                seen.append(("admin 401", await resp.read()))
            for path in ("/stats", "/metrics", "/rollouts",
                         f"/rollouts/{rollout['id']}/events"):  # fmt: skip
                async with http.get(admin + path, headers=ADMIN_HEADERS) as resp:
                    assert resp.status == 200, path
                    seen.append((path, await resp.read()))
            await gw.unregister(rollout["id"])
        stored = await store.events(rollout["id"])
        assert len(stored) >= 10
        for event in stored:
            assert_no_key(f"stored event {event.seq}", repr(event.to_dict()))
    for name, data in seen:
        assert_no_key(name, data)
    for record in caplog.records:
        assert_no_key(f"log record {record.name}", record.getMessage() + repr(record.args))
    assert_no_key("the captured log", caplog.text)
    for file in store_files(db):
        assert_no_key(f"store file {file.name}", file.read_bytes())


async def test_an_eval_run_prints_and_stores_no_upstream_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    db = tmp_path / "eval.db"
    config = SimConfig(seed=5, faults=("status=500@0.3", "status=401@0.3"))
    async with Simulator(config) as sim:
        outcome = await arolltap(
            "eval", TASKS, "--harness", "chat", "--endpoint", sim.base_url,
            "--api-key-env", KEY_ENV, "-n", "6", "--store", f"sqlite:///{db}",
        )  # fmt: skip
        assert sim.stats.last_request_headers.get("authorization") == f"Bearer {KEY}"
        assert sim.stats.faults.get("status", 0) > 0, "no upstream error was exercised"
    assert outcome.code in (0, 1), outcome.output
    assert_no_key("eval stdout", outcome.stdout)
    assert_no_key("eval stderr", outcome.stderr)
    files = store_files(db)
    assert files
    for path in files:
        assert_no_key(f"store file {path.name}", path.read_bytes())
