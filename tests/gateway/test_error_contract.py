"""The gateway's error contract, case by case, over raw HTTP."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from helpers import ADMIN_HEADERS, GatewayFactory, register
from rolltap.gateway import Gateway

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def post(
    http: aiohttp.ClientSession, url: str, *, data: Any = None, json: Any = None, key: str = ""
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with http.post(url, data=data, json=json, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_unknown_rollout_is_404(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    url = f"{gateway.admin_url}/r/ro_nope/v1/chat/completions"
    status, body = await post(http, url, json=CHAT, key="x")
    assert (status, body["error"]["code"]) == (404, "rollout_not_found")
    assert body["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("key", ["", "wrong", "rt-almost"])
async def test_bad_secret_is_401(gateway: Gateway, http: aiohttp.ClientSession, key: str) -> None:
    rollout = await register(http, gateway)
    status, body = await post(http, rollout["base_url"] + "/chat/completions", json=CHAT, key=key)
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")


async def test_x_api_key_header_authenticates(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with http.post(
        rollout["base_url"] + "/chat/completions",
        json=CHAT,
        headers={"x-api-key": rollout["api_key"]},
    ) as resp:
        assert resp.status == 200


async def test_malformed_json_is_400(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    rollout = await register(http, gateway)
    status, body = await post(
        http, rollout["base_url"] + "/chat/completions", data=b"{nope", key=rollout["api_key"]
    )
    assert (status, body["error"]["code"]) == (400, "malformed_json")


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ([1, 2], "body"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id",
        ),
        ({**CHAT, "stream": "yes"}, "stream"),
        ({**CHAT, "temperature": "hot"}, "temperature"),
        ({**CHAT, "max_tokens": -1}, "max_tokens"),
        ({**CHAT, "tools": [{"type": "function"}]}, "tools[0].function.name"),
        ({**CHAT, "model": 3}, "model"),
    ],
)
async def test_invalid_body_is_400_naming_the_field(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession, payload: Any, field: str
) -> None:
    # translated (chat -> Messages): validated in the harness's dialect; a relay checks
    # only what the gateway reads (test_relay_passthrough.py)
    gateway = await make_gateway(dialect="messages")
    rollout = await register(http, gateway)
    status, body = await post(
        http, rollout["base_url"] + "/chat/completions", json=payload, key=rollout["api_key"]
    )
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert body["error"]["param"] == field
    assert body["error"]["message"].startswith(field)


async def test_body_over_the_limit_is_413(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway: Gateway = await make_gateway(max_body_bytes=1024)
    rollout = await register(http, gateway)
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 2048}]}
    status, body = await post(
        http, rollout["base_url"] + "/chat/completions", json=big, key=rollout["api_key"]
    )
    assert (status, body["error"]["code"]) == (413, "request_too_large")
    assert gateway.snapshot()["totals"]["requests"] == 0


async def test_unknown_route_is_404_in_openai_shape(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    status, body = await post(
        http, rollout["base_url"] + "/embeddings", json={}, key=rollout["api_key"]
    )
    assert (status, body["error"]["code"]) == (404, "not_found")


async def test_admin_api_needs_the_admin_token(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    for method, path in [("POST", "/rollouts"), ("GET", "/stats"), ("GET", "/metrics")]:
        async with http.request(
            method, gateway.admin_url + path, headers={"Authorization": "Bearer nope"}
        ) as resp:
            assert resp.status == 401, path
            assert (await resp.json())["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    ("payload", "field"),
    [({"user": 3}, "user"), ({"metadata": "x"}, "metadata"), ({"colour": "red"}, "colour")],
)
async def test_register_validates_its_body(
    gateway: Gateway, http: aiohttp.ClientSession, payload: Any, field: str
) -> None:
    async with http.post(
        gateway.admin_url + "/rollouts", json=payload, headers=ADMIN_HEADERS
    ) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["param"] == field


async def test_registration_contract(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    rollout = await register(http, gateway, user="u", api_key="upstream-key", metadata={"k": 1})
    assert set(rollout) >= {"id", "api_key", "base_url", "openai_base_url", "anthropic_base_url"}
    assert (
        rollout["base_url"] == rollout["openai_base_url"] == rollout["anthropic_base_url"] + "/v1"
    )
    assert rollout["openai_base_url"].endswith(f"/r/{rollout['id']}/v1")
    assert rollout["api_key"] != "upstream-key"
    async with http.get(gateway.admin_url + "/stats", headers=ADMIN_HEADERS) as resp:
        stats = await resp.json()
    assert stats["rollouts"] == 1 and stats["pool"]["clients"] == 1
    assert "upstream-key" not in str(stats)
    async with http.get(gateway.admin_url + "/metrics", headers=ADMIN_HEADERS) as resp:
        text = await resp.text()
    assert "rolltap_gateway_rollouts 1.0" in text
    assert "rolltap_pool_clients 1.0" in text
    async with http.delete(
        f"{gateway.admin_url}/rollouts/{rollout['id']}", headers=ADMIN_HEADERS
    ) as resp:
        assert resp.status == 200
    async with http.delete(
        f"{gateway.admin_url}/rollouts/{rollout['id']}", headers=ADMIN_HEADERS
    ) as resp:
        assert resp.status == 404
