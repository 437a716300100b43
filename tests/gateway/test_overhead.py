"""What the gateway itself adds to a call: ``timing.gateway_ms`` (with ``upstream_ms`` and
``waited_ms``) in each response event, ``rolltap_gateway_overhead_seconds`` in ``/metrics``,
p50/p99 in ``/stats``, ``X-Rolltap-Overhead-Ms`` on a whole answer — with the OpenAI SDK as
the harness and the simulator as the upstream (its first token 150 ms late)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from gateway.policykit import admin, gate, gateway_over, of_kind
from helpers import ADMIN_HEADERS, events, openai_client, register, settle
from rolltap.config import EndpointConfig
from rolltap.gateway.overhead import BUCKETS_S, Overhead, overhead_metric
from rolltap.gateway.stats import GatewayStats, render_metrics
from rolltap.sim import SimConfig, Simulator

TTFT_MS = 150


def test_overheads_fall_in_their_buckets_and_sum_over_workers() -> None:
    seen = Overhead()
    for seconds in (0.0001, 0.0002, 0.003, 2.0):  # on a bound: in it (le)
        seen.record(seconds)
    doc = seen.as_dict()
    assert doc["count"] == 4 and doc["buckets"][0] == 1 and doc["buckets"][-1] == 1
    assert (doc["p50_ms"], doc["p99_ms"]) == (0.2, 2000.0)
    family = overhead_metric([doc, doc])
    counts = {s.labels.get("le"): s.value for s in family.samples if s.name.endswith("_bucket")}
    assert counts[str(BUCKETS_S[0])] == 2 and counts["+Inf"] == 8
    assert Overhead().as_dict()["p50_ms"] is None
    stats = GatewayStats()
    stats.record_response({}, overhead_s=0.0004)
    text = render_metrics(lambda: {
        "totals": stats.as_dict(), "rollouts": 0, "intercepts": 0, "servers": 0, "pool": {},
    }).decode()  # fmt: skip
    assert 'rolltap_gateway_overhead_seconds_bucket{le="0.0005"} 1.0' in text
    assert "rolltap_gateway_overhead_seconds_count 1.0" in text


def _timing(log: list[dict[str, Any]]) -> list[dict[str, float]]:
    return [payload["timing"] for payload in of_kind(log, "model_response")]


async def test_each_answer_says_what_the_gateway_added(http: aiohttp.ClientSession) -> None:
    async with Simulator(SimConfig(seed=3, ttft_ms=TTFT_MS)) as sim:
        ep = EndpointConfig(base_url=sim.base_url, model="sim-model")
        async with gateway_over(ep) as gateway:
            rollout = await register(http, gateway)
            ask: list[Any] = [{"role": "user", "content": "hi"}]
            async with openai_client(rollout) as client, asyncio.TaskGroup() as tasks:
                await client.chat.completions.create(model="m", messages=ask)
                stream = await client.chat.completions.create(model="m", messages=ask,
                                                              stream=True)  # fmt: skip
                async for _ in stream:
                    pass
                # held by a pause: the wait is the call's, not the gateway's
                await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
                call = tasks.create_task(client.chat.completions.create(model="m", messages=ask))
                await settle(lambda: gate(gateway)["held"] == 1)
                held_at = time.perf_counter()  # held from here on, at least
                _status, policy = await admin(http, gateway, "GET", "/policy")  # the trainer looks
                assert policy["endpoints"]["default"]["held"] == 1
                resuming_at = time.perf_counter()  # and until the resume arrives, at least
                await admin(http, gateway, "POST", "/resume", {})
                await call
            url = rollout["openai_base_url"] + "/chat/completions"
            auth = {"Authorization": f"Bearer {rollout['api_key']}"}
            async with http.post(url, json={"model": "m", "messages": ask}, headers=auth) as resp:
                header = resp.headers.get("X-Rolltap-Overhead-Ms")
            async with http.post(url, json={"model": "m", "messages": ask, "stream": True},
                                 headers=auth) as resp:  # fmt: skip
                streamed_header = resp.headers.get("X-Rolltap-Overhead-Ms")
                await resp.read()
            log = await events(http, gateway, rollout["id"])
            _status, stats = await admin(http, gateway, "GET", "/stats")
            async with http.get(gateway.admin_url + "/metrics", headers=ADMIN_HEADERS) as resp:
                metrics = await resp.text()
    timings = _timing(log)
    assert len(timings) == 5
    for timing in timings:
        assert timing["upstream_ms"] >= TTFT_MS  # the simulator's first token, at least
        assert timing["gateway_ms"] >= 0 and timing["waited_ms"] >= 0
        assert timing["upstream_ms"] + timing["waited_ms"] <= timing["total_ms"]
    assert timings[2]["waited_ms"] >= (resuming_at - held_at) * 1000
    assert header is not None and float(header) == timings[3]["gateway_ms"]
    assert streamed_header is None  # its headers left before the answer was read
    overhead = stats["totals"]["gateway_overhead"]
    assert overhead["count"] == 5 and overhead["p50_ms"] is not None
    assert overhead["p99_ms"] >= overhead["p50_ms"]
    assert "rolltap_gateway_overhead_seconds_count 5.0" in metrics
