"""Fields a translation dropped, counted per field in ``/stats`` and ``/metrics``.

A translation that drops a field names it in the request event's ``rewrites`` as
``{"dropped": "<path>", "reason": ...}``; the gateway counts them by field, list
positions left out (``tools[2]`` is ``tools[]``), into ``/stats``' ``dropped_fields``
and ``rolltap_dropped_fields_total{field}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from helpers import ADMIN_HEADERS, GatewayFactory
from rolltap.clients.fake import FakeReply, FakeUpstream
from rolltap.clients.upstream import ModelRequest, UpstreamRequest
from rolltap.gateway import Gateway
from rolltap.gateway.stats import MAX_DROPPED_FIELDS, GatewayStats, dropped_field
from upstreams import CHAT_ANSWER

DROPS = [
    {"dropped": "reasoning.summary", "reason": "presentation only"},
    {"dropped": "tools[2]", "reason": "a hosted tool: unsupported = drop"},
    {"field": "model", "from": "m", "to": "up"},
]


class DroppingUpstream(FakeUpstream):
    """A chat upstream whose rewrite drops two fields and renames the model, as a
    translation does."""

    async def rewrite(self, call: ModelRequest) -> UpstreamRequest:
        sent = await super().rewrite(call)
        sent.rewrites = [dict(r) for r in DROPS]
        return sent


async def _admin(http: aiohttp.ClientSession, gateway: Gateway, path: str) -> Any:
    async with http.get(gateway.admin_url + path, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 200
        return await (resp.json() if path == "/stats" else resp.text())


async def test_dropped_fields_are_counted_in_stats_and_metrics(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await gateway.register()
    rollout.upstream = DroppingUpstream("chat", [FakeReply.json(CHAT_ANSWER) for _ in range(2)])
    url = gateway.describe(rollout)["base_url"] + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(2):
        auth = {"Authorization": f"Bearer {rollout.secret}"}
        async with http.post(url, json=body, headers=auth) as resp:
            assert resp.status == 200
    request = rollout.log[0].payload
    assert request["rewrites"] == DROPS  # the event names each field as it was
    stats = await _admin(http, gateway, "/stats")
    assert stats["totals"]["dropped_fields"] == {"reasoning.summary": 2, "tools[]": 2}
    metrics = await _admin(http, gateway, "/metrics")
    assert 'rolltap_dropped_fields_total{field="reasoning.summary"} 2.0' in metrics
    assert 'rolltap_dropped_fields_total{field="tools[]"} 2.0' in metrics


def test_the_fields_counted_are_bounded() -> None:
    stats = GatewayStats()
    many = [{"dropped": f"field_{i}", "reason": "unknown"} for i in range(MAX_DROPPED_FIELDS + 5)]
    stats.record_rewrites(many)
    stats.record_rewrites([{"dropped": "field_0", "reason": "unknown"}])
    counts = stats.as_dict()["dropped_fields"]
    assert len(counts) == MAX_DROPPED_FIELDS + 1
    assert (counts["other"], counts["field_0"]) == (5, 2)


async def test_a_translated_agent_request_counts_what_it_dropped(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    # Codex's real request (Responses) to a chat upstream: the translation drops what
    # only the provider uses, and says so
    capture = json.loads((Path(__file__).parents[1] / "agents/fixtures/codex.json").read_text())
    (post,) = capture["requests"]
    gateway = await make_gateway(dialect="chat")
    rollout = await gateway.register()
    url = gateway.describe(rollout)["base_url"] + "/responses"
    auth = {"Authorization": f"Bearer {rollout.secret}", "Content-Type": "application/json"}
    async with http.post(url, data=orjson.dumps(post["body"]), headers=auth) as resp:
        assert resp.status == 200
        await resp.read()
    rewrites = rollout.log[0].payload["rewrites"]
    dropped = [dropped_field(r["dropped"]) for r in rewrites if "dropped" in r]
    assert {"reasoning.summary", "store", "include", "prompt_cache_key"} <= set(dropped)
    counts = (await _admin(http, gateway, "/stats"))["totals"]["dropped_fields"]
    assert counts == {name: dropped.count(name) for name in dropped}
    metrics = await _admin(http, gateway, "/metrics")
    assert 'rolltap_dropped_fields_total{field="reasoning.summary"} 1.0' in metrics
