"""Policy versions through the admin API, as a trainer sets them: every answer records the
version current when it was generated (the engine's own where it reports one), and the
routes refuse what their OpenAPI document refuses."""

from __future__ import annotations

from typing import Any

import aiohttp
import jsonschema
import openai
import pytest

from gateway.policykit import admin, engines_and_gateway, gateway_over, of_kind
from helpers import events, openai_client, register
from rolltap.config import EndpointConfig
from rolltap.gateway import Gateway
from rolltap.sim import Simulator

HI: list[Any] = [{"role": "user", "content": "hi"}]


async def _answered_versions(
    http: aiohttp.ClientSession, gateway: Gateway, rollout: dict[str, Any]
) -> list[Any]:
    """One more call of ``rollout``, then the policy_version of each of its answers."""
    async with openai_client(rollout) as client:
        await client.chat.completions.create(model="m", messages=HI)
    responses = of_kind(await events(http, gateway, rollout["id"]), "model_response")
    return [r["policy_version"] for r in responses]


async def test_answers_carry_the_version_set_through_the_admin_api(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    assert await _answered_versions(http, gateway, rollout) == [None]
    status, doc = await admin(http, gateway, "POST", "/policy", {"version": "step-1"})
    assert status == 200
    assert doc["endpoints"]["default"]["version"] == "step-1"
    assert doc["endpoints"]["default"]["epoch"] == 1
    assert await _answered_versions(http, gateway, rollout) == [None, "step-1"]
    # the same version again is no change; null clears it (a change: a new epoch)
    assert (await admin(http, gateway, "POST", "/policy", {"version": "step-1"}))[1][
        "endpoints"]["default"]["epoch"] == 1  # fmt: skip
    status, doc = await admin(http, gateway, "POST", "/policy", {"version": None})
    assert (status, doc["endpoints"]["default"]["version"]) == (200, None)
    assert doc["endpoints"]["default"]["epoch"] == 2
    assert await _answered_versions(http, gateway, rollout) == [None, "step-1", None]


async def test_a_version_for_one_endpoint_or_for_all(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    eps = [EndpointConfig(name=n, base_url=sim.base_url, model="sim-model") for n in "ab"]
    async with gateway_over(eps) as gateway:
        on_a = await register(http, gateway, endpoint="a")
        on_b = await register(http, gateway, endpoint="b")
        await admin(http, gateway, "POST", "/policy", {"version": "v1", "endpoint": "a"})
        assert await _answered_versions(http, gateway, on_a) == ["v1"]
        assert await _answered_versions(http, gateway, on_b) == [None]
        status, doc = await admin(http, gateway, "POST", "/policy", {"version": "v2"})
        assert status == 200
        assert {n: g["version"] for n, g in doc["endpoints"].items()} == {"a": "v2", "b": "v2"}
        assert await _answered_versions(http, gateway, on_a) == ["v1", "v2"]
        assert await _answered_versions(http, gateway, on_b) == [None, "v2"]
        status, doc = await admin(http, gateway, "POST", "/policy",
                                  {"version": "v3", "endpoint": "c"})  # fmt: skip
        assert (status, doc["error"]["code"], doc["error"]["param"]) == (
            400, "invalid_request", "endpoint",
        )  # fmt: skip
        assert gateway.policy()["endpoints"]["a"]["version"] == "v2"  # nothing changed


async def test_every_error_carries_the_version_refusals_included(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    await gateway.set_policy_version("step-5")
    rollout = await register(http, gateway, limits={"max_turns": 1})
    async with openai_client(rollout) as client:
        await client.chat.completions.create(model="m", messages=HI)
        with pytest.raises(openai.RateLimitError):  # refused in the call: limit_reached
            await client.chat.completions.create(model="m", messages=HI)
    secret = {"Authorization": f"Bearer {rollout['api_key']}"}
    url = rollout["base_url"] + "/chat/completions"
    async with http.post(url, data=b"{", headers=secret) as resp:
        assert resp.status == 400  # refused at its body, before the call began
    errors = of_kind(await events(http, gateway, rollout["id"]), "model_error")
    assert [(e["code"], e["policy_version"]) for e in errors] == [
        ("limit_reached", "step-5"), ("malformed_json", "step-5"),
    ]  # fmt: skip


BAD_BODIES = [
    ("/policy", b'{"version": "v", "extra": 1}', "extra"),
    ("/policy", b'{"version": 7}', "version"),
    ("/policy", b'{"version": true}', "version"),
    ("/policy", b"{}", "version"),
    ("/policy", b"", "version"),
    ("/policy", b'{"version": "v", "endpoint": 3}', "endpoint"),
    ("/policy", b'["v"]', "body"),
    ("/pause", b'{"mode": "sleep"}', "mode"),
    ("/pause", b'{"mode": null}', "mode"),
    ("/pause", b"{}", "mode"),
    ("/pause", b'{"mode": "hold", "version": "v"}', "version"),
    ("/resume", b'{"mode": "hold"}', "mode"),
    ("/resume", b'{"endpoint": "nope"}', "endpoint"),
]


@pytest.mark.parametrize(("path", "raw", "field"), BAD_BODIES)
async def test_a_bad_body_is_400_naming_the_field(
    gateway: Gateway, http: aiohttp.ClientSession, path: str, raw: bytes, field: str
) -> None:
    status, body = await admin(http, gateway, "POST", path, raw=raw)
    assert (status, body["error"]["code"], body["error"].get("param")) == (
        400, "invalid_request", field,
    )  # fmt: skip
    assert gateway.policy()["endpoints"]["default"]["epoch"] == 0
    assert gateway.policy()["endpoints"]["default"]["paused"] is None


async def test_bad_json_is_400_malformed_json(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    for path in ("/policy", "/pause", "/resume"):
        status, body = await admin(http, gateway, "POST", path, raw=b'{"version": ')
        assert (status, body["error"]["code"]) == (400, "malformed_json")


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/policy", None), ("POST", "/policy", {"version": "v"}),
    ("POST", "/pause", {"mode": "hold"}), ("POST", "/resume", {}),
])  # fmt: skip
async def test_the_routes_want_the_admin_token(
    gateway: Gateway, http: aiohttp.ClientSession, method: str, path: str, body: Any
) -> None:
    status, answer = await admin(http, gateway, method, path, body, token=False)
    assert (status, answer["error"]["code"]) == (401, "invalid_api_key")
    rollout = await register(http, gateway)  # neither may a rollout's secret
    secret = {"Authorization": f"Bearer {rollout['api_key']}"}
    async with http.request(method, gateway.admin_url + path, json=body, headers=secret) as r:
        assert r.status == 401
    gate = gateway.policy()["endpoints"]["default"]
    assert (gate["version"], gate["paused"]) == (None, None)


async def test_get_policy_shows_each_gate(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    await admin(http, gateway, "POST", "/policy", {"version": "step-3"})
    await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
    status, doc = await admin(http, gateway, "GET", "/policy")
    assert status == 200
    gate = doc["endpoints"]["default"]
    assert gate.pop("paused_for_s") >= 0
    assert gate == {
        "version": "step-3", "epoch": 1, "paused": "hold", "in_flight": 0, "held": 0,
        "pauses": 1, "cut": 0, "refused": 0, "max_staleness": None,
        "rollouts_per_version": None, "began": None, "held_ahead": 0,
    }  # fmt: skip
    status, doc = await admin(http, gateway, "POST", "/resume", {})
    assert (doc["endpoints"]["default"]["paused"], doc["endpoints"]["default"]["paused_for_s"]) == (
        None, None,
    )  # fmt: skip
    assert gateway.snapshot()["policy"] == doc["endpoints"]  # /stats shows the gates too


#: bodies for each route: the document's verdict and the handler's must agree
CONTRACT_BODIES: dict[str, list[Any]] = {
    "/policy": [{"version": "v"}, {"version": None}, {"version": "v", "endpoint": "default"},
                {"version": "v", "endpoint": None}, {"version": "v", "endpoint": "x"},
                {"version": 1}, {}, {"version": "v", "mode": "hold"}, [], "v"],
    "/pause": [{"mode": m} for m in ("hold", "drain", "abort", "HOLD", "", None, 1)]
              + [{"mode": "hold", "endpoint": "default"}, {"mode": "hold", "endpoint": 1}, {}],
    "/resume": [{}, {"endpoint": "default"}, {"endpoint": None}, {"endpoint": "x"},
                {"endpoint": []}, {"version": "v"}],
}  # fmt: skip


async def test_the_openapi_document_refuses_what_the_routes_refuse(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    async with http.get(gateway.admin_url + "/openapi.json") as resp:
        doc = await resp.json()
    assert {"/policy", "/pause", "/resume"} <= set(doc["paths"])
    assert set(doc["paths"]["/policy"]) == {"get", "post"}
    for path, bodies in CONTRACT_BODIES.items():
        operation = doc["paths"][path]["post"]
        assert {"200", "400", "401"} <= set(operation["responses"])
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        for body in bodies:
            documented = jsonschema.Draft202012Validator(schema).is_valid(body)
            status, answer = await admin(http, gateway, "POST", path, body)
            assert status == (200 if documented else 400), (path, body, answer)
            await gateway.resume()
        # a route whose body has a required field says the body is required
        assert operation["requestBody"]["required"] == bool(schema["required"])
        status, _ = await admin(http, gateway, "POST", path)  # no body at all
        assert status == (400 if operation["requestBody"]["required"] else 200)


async def test_the_engine_reported_version_wins_and_a_disagreement_is_noted(
    http: aiohttp.ClientSession,
) -> None:
    async with engines_and_gateway() as ([stand_in], gateway):
        stand_in.weight_version = "engine-7"
        rollout = await register(http, gateway)
        assert await _answered_versions(http, gateway, rollout) == ["engine-7"]
        await gateway.set_policy_version("step-8")
        assert await _answered_versions(http, gateway, rollout) == ["engine-7", "engine-7"]
        await gateway.set_policy_version("engine-7")
        assert await _answered_versions(http, gateway, rollout) == ["engine-7"] * 3
        log = await events(http, gateway, rollout["id"])
    # only the second answer disagreed: its note follows its response
    notes = of_kind(log, "note")
    responses = of_kind(log, "model_response")
    assert len(notes) == 1
    assert notes[0] == {
        "text": "the engine answered with weights 'engine-7', the gateway's policy version "
        "is 'step-8'", "reason": "policy_version_mismatch",
        "intercept_id": responses[1]["intercept_id"], "engine_version": "engine-7",
        "gateway_version": "step-8",
    }  # fmt: skip
    kinds = [e["kind"] for e in log]
    assert kinds[kinds.index("note") - 1] == "model_response"


async def test_without_an_engine_version_the_gateways_is_recorded(
    http: aiohttp.ClientSession,
) -> None:
    async with engines_and_gateway() as (_, gateway):
        await gateway.set_policy_version("step-2")
        rollout = await register(http, gateway)
        assert await _answered_versions(http, gateway, rollout) == ["step-2"]
        assert of_kind(await events(http, gateway, rollout["id"]), "note") == []
