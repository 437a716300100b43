"""No call leaves an empty log: each step that refuses a call records it.

Once the rollout is known, a call refused at its secret, its body (too large, too slow,
not JSON, not an object), validation (translated) or a relay's check, its
``Idempotency-Key``, its rollout's limits, a full pool or a translation the upstream
cannot express gets a ``model_request`` (what the harness sent, ``"sent": false``) and a
``model_error`` with the refusal's code, over raw HTTP against a real gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from helpers import ADMIN_TOKEN, GatewayFactory
from rolltap.clients.fake import FakeUpstream
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import InvalidRequestError
from rolltap.gateway import Gateway, RolloutLimits
from rolltap.gateway.rollout import Rollout
from rolltap.sim import SimConfig, Simulator

HI = [{"role": "user", "content": "hi"}]
CHAT = {"model": "m", "messages": HI}


async def call(
    http: aiohttp.ClientSession, gateway: Gateway, rollout: Rollout, *,
    route: str = "/chat/completions", data: bytes | None = None, json: Any = None,
    secret: str | None = None, headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    """POST to ``rollout``'s ``route`` as a harness would; the status and error body."""
    url = gateway.describe(rollout)["base_url"] + route
    sent = {"Authorization": f"Bearer {rollout.secret if secret is None else secret}"}
    async with http.post(url, data=data, json=json, headers={**sent, **(headers or {})}) as resp:
        return resp.status, await resp.json()


def refusal(rollout: Rollout) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rollout's only two events: the refused call's request and error."""
    assert [e.kind for e in rollout.log] == ["model_request", "model_error"]
    request, error = (dict(e.payload) for e in rollout.log)
    assert request["intercept_id"] == error["intercept_id"]
    assert (request["sent"], request["rewrites"]) == (False, [])
    return request, error


async def test_a_bad_secret_is_recorded_but_a_throttled_attempt_is_not(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(auth_failures_per_minute=2)
    rollout = await gateway.register()
    status, _ = await call(http, gateway, rollout, json=CHAT, secret="rt-guess")
    assert status == 401
    request, error = refusal(rollout)
    assert (request["route"], request["dialect"], request["upstream_dialect"]) == (
        "chat.completions", "chat", "chat",
    )  # fmt: skip
    # the body of an unauthenticated call is not read; nothing it sent is recorded
    assert (request["messages"], request["params"], request["stream"]) == ([], {}, False)
    assert "body_bytes" not in request and "rt-guess" not in str(request)
    assert (error["code"], error["status"]) == ("invalid_api_key", 401)
    assert (await call(http, gateway, rollout, json=CHAT, secret="rt-again"))[0] == 401
    # over the throttle: answered 429, and not recorded (a guesser must not grow the log)
    assert (await call(http, gateway, rollout, json=CHAT))[0] == 429
    assert len(rollout.log) == 4
    assert gateway.snapshot()["totals"]["errors"] == {"invalid_api_key": 2}


async def test_a_body_over_the_limit_is_recorded(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(max_body_bytes=1024)
    rollout = await gateway.register()
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 2048}]}
    status, _ = await call(http, gateway, rollout, json=big)
    assert status == 413
    request, error = refusal(rollout)
    assert request["messages"] == [] and "body_bytes" not in request  # never read
    assert error["code"] == "request_too_large"


async def test_a_body_too_slow_is_recorded(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(body_timeout_s=0.2)
    rollout = await gateway.register()
    url = urlsplit(gateway.describe(rollout)["base_url"] + "/chat/completions")
    assert url.hostname is not None and url.port is not None
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {rollout.secret}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    writer.write(head.encode() + b'{"messages": [')  # ... and the rest never comes
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    assert b" 408 " in status_line
    _, error = refusal(rollout)
    assert error["code"] == "request_timeout"


async def test_malformed_json_is_recorded_with_its_size(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register()
    status, body = await call(http, gateway, rollout, data=b"{nope")
    assert (status, body["error"]["code"]) == (400, "malformed_json")
    request, error = refusal(rollout)
    assert request["body_bytes"] == 5 and request["params"] == {}
    assert error["code"] == "malformed_json"


async def test_a_body_that_is_not_an_object_is_recorded(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register()
    status, _ = await call(http, gateway, rollout, route="/messages", json=[1, 2])
    assert status == 400
    request, error = refusal(rollout)
    assert (request["route"], request["dialect"]) == ("messages", "messages")
    assert (error["code"], error["field"]) == ("invalid_request", "body")


async def test_a_body_a_translation_finds_invalid_is_recorded_with_its_messages(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(dialect="messages")  # chat is translated, so validated
    rollout = await gateway.register()
    bad = [*HI, {"role": "wizard", "content": "x"}]
    status, _ = await call(http, gateway, rollout, json={**CHAT, "messages": bad, "stream": True})
    assert status == 400
    request, error = refusal(rollout)
    assert (request["messages"], request["prefix_messages"], request["stream"]) == (bad, 0, True)
    assert request["params"] == {"model": "m", "stream": True}
    assert (error["code"], error["field"]) == ("invalid_request", "messages[1].role")


async def test_a_body_a_relay_cannot_read_is_recorded_whole(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register()  # chat to chat: relayed
    status, _ = await call(http, gateway, rollout, json={"model": "m", "messages": "hi"})
    assert status == 400
    request, error = refusal(rollout)
    # no conversation to read: the body is recorded as its parameters
    assert (request["messages"], request["params"]) == ([], {"model": "m", "messages": "hi"})
    assert error["field"] == "messages"


async def test_a_bad_idempotency_key_is_recorded(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register()
    status, _ = await call(http, gateway, rollout, json=CHAT, headers={"Idempotency-Key": " "})
    assert status == 400
    request, error = refusal(rollout)
    assert request["messages"] == HI
    assert error["field"] == "Idempotency-Key"


async def test_a_call_over_the_rollouts_limit_is_recorded(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register(limits=RolloutLimits(max_turns=1))
    assert (await call(http, gateway, rollout, json=CHAT))[0] == 200
    assert (await call(http, gateway, rollout, json=CHAT))[0] == 429
    kinds = [e.kind for e in rollout.log]
    assert kinds == ["model_request", "model_response", "model_request", "model_error"]
    refused = dict(rollout.log[2].payload)
    assert refused["sent"] is False and refused["prefix_messages"] == 1  # the same history
    assert rollout.log[3].payload["code"] == "limit_reached"


async def test_a_call_the_upstream_cannot_express_is_recorded(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register()
    fake = FakeUpstream("chat")
    fake.rewrite_error = InvalidRequestError("cannot say that", field="tools")
    rollout.upstream = fake  # its rewrite refuses, as a translation would
    status, _ = await call(http, gateway, rollout, json=CHAT)
    assert status == 400
    request, error = refusal(rollout)
    assert request["messages"] == HI and fake.requests == []
    assert (error["code"], error["field"]) == ("invalid_request", "tools")


@pytest.fixture
async def two_sims() -> AsyncIterator[list[Simulator]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(Simulator(SimConfig(seed=i))) for i in range(2)]


async def test_a_call_the_pool_has_no_client_for_is_recorded(
    two_sims: list[Simulator], http: aiohttp.ClientSession
) -> None:
    # one client at most: the rollout's replica goes down, and the one it must move to
    # needs a second client while the first is still leased
    endpoint = EndpointConfig(replicas=[s.base_url for s in two_sims], model="sim-model")
    settings = GatewaySettings(admin_token=ADMIN_TOKEN, max_model_clients=1)
    async with Gateway(endpoint, settings) as gateway:
        rollout = await gateway.register()
        assert rollout.pin is not None
        pinned = next(s for s in two_sims if s.base_url == rollout.pin.url)
        await pinned.aclose()
        assert (await call(http, gateway, rollout, json=CHAT))[0] == 502  # marks it down
        status, body = await call(http, gateway, rollout, json=CHAT)
    assert (status, body["error"]["code"]) == (429, "model_pool_full")
    kinds = [e.kind for e in rollout.log]
    # the first call was sent (and failed); the second was refused before it was made
    assert kinds == ["model_request", "model_error", "note", "model_request", "model_error"]
    assert "sent" not in rollout.log[0].payload and rollout.log[3].payload["sent"] is False
