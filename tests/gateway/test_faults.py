"""Every upstream fault reaches the harness as a proper OpenAI error and lands in the events."""

from __future__ import annotations

import aiohttp
import openai
import pytest

from helpers import GatewayFactory, events, openai_client, register
from rolltap.config import Timeouts
from rolltap.gateway import Gateway

# fault spec, stream?, expected HTTP status (None: in-band error mid-stream), expected code
CASES = [
    ("status=500", False, 500, "upstream_http_error"),
    ("status=429", False, 429, "upstream_http_error"),
    ("status=503", True, 503, "upstream_http_error"),
    ("stall=30", False, 504, "upstream_timeout"),
    ("stall-mid=30", True, None, "upstream_timeout"),
    ("drop=2", True, None, "upstream_bad_response"),
    ("drop=0", False, 502, "upstream_bad_response"),
    ("malformed", False, 502, "upstream_bad_response"),
    ("malformed", True, None, "upstream_bad_response"),
    ("reset", False, 502, "upstream_bad_response"),
]


@pytest.mark.parametrize(("fault", "stream", "status", "code"), CASES)
async def test_fault_reaches_harness_and_trace(
    make_gateway: GatewayFactory,
    http: aiohttp.ClientSession,
    fault: str,
    stream: bool,
    status: int | None,
    code: str,
) -> None:
    gateway: Gateway = await make_gateway(timeouts=Timeouts(read=0.5))
    rollout = await register(http, gateway)
    async with openai_client(rollout, default_headers={"x-sim-fault": fault}) as client:
        with pytest.raises(openai.APIError) as info:
            response = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=stream
            )
            if stream:
                async for _ in response:  # type: ignore[union-attr]
                    pass
    err = info.value
    if status is None:
        assert not isinstance(err, openai.APIStatusError)  # delivered in-band, mid-stream
        assert err.body is not None and err.body["code"] == code  # type: ignore[index]
    else:
        assert isinstance(err, openai.APIStatusError)
        assert err.status_code == status
        assert err.body is not None and err.body["code"] == code  # type: ignore[index]
    evs = await events(http, gateway, rollout["id"])
    assert [e["kind"] for e in evs] == ["model_request", "model_error"]
    assert evs[1]["payload"]["code"] == code
    # afterwards: healthy, nothing held, and a normal call works
    assert gateway.snapshot()["intercepts"] == 0
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "again"}]
        )
    assert reply.choices[0].message.content


async def test_retry_after_and_upstream_error_are_passed_through(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    async with http.post(
        rollout["openai_base_url"] + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        headers={"Authorization": f"Bearer {rollout['api_key']}", "x-sim-fault": "status=429"},
    ) as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "1"
        body = await resp.json()
    assert body["error"]["code"] == "upstream_http_error"
    assert body["error"]["upstream"]["message"]  # the upstream's own error, kept
    evs = await events(http, gateway, rollout["id"])
    assert evs[1]["payload"]["status"] == 429
    assert "upstream_body" in evs[1]["payload"]


async def test_unreachable_upstream_is_502(http: aiohttp.ClientSession) -> None:
    # a port nobody listens on: bind, note it, close
    import socket

    from helpers import ADMIN_TOKEN
    from rolltap.config import EndpointConfig, GatewaySettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = EndpointConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client:
            with pytest.raises(openai.APIStatusError) as info:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}]
                )
    assert info.value.status_code == 502
    assert info.value.body["code"] == "upstream_unreachable"  # type: ignore[index]
