"""Every request the real agents made (tests/agents/fixtures: first turn and whole tool
loop), replayed raw through a gateway to each upstream dialect (``rolltap.sim`` behind a
recording proxy), in order, on one rollout per fixture, with the agent's own path and
headers (its credential header holding the rollout's secret).

Under ``unsupported = "drop"`` every call is answered 200; the upstream receives the body
the translation table gives (``translate_request``, then the relay's documented rewrites;
the harness's own dialect: a relay, the body as sent) and none of the vendor headers it
drops; each dropped field is named in the request event's ``rewrites``. Under
``"refuse"`` each inexpressible field is one 400 naming it, recorded as a
``model_request`` and a ``model_error``; with the named fields taken out the call passes.
Every message and tool list is recorded once (Claude Code's moving prompt-caching marker
included), and each call as sent is rebuilt from the events (``sent_requests``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import aiohttp
import orjson
import pytest

from agents.capture import SECRET_HEADERS
from agents.loopkit import FIXTURE_NAMES, model_calls, recorded
from dialects.agentkit import DIALECTS, Captured, remove
from helpers import ADMIN_TOKEN, events, register
from rolltap.clients.relay_upstream import apply_rewrites
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.dialects.translate import dropped_headers, translate_request
from rolltap.events import Event
from rolltap.exports.sent import sent_requests
from rolltap.gateway import Gateway
from rolltap.gateway.conversation import CONVERSATION_KEYS, conversation_of
from rolltap.sim import Simulator
from upstreams import recording

MODEL = "sim-model"
#: what ``refuse`` names, in order, per agent (docs/translation.md: the hosted tools
#: no other dialect expresses); a relay to the agent's own dialect refuses nothing
REFUSED = {"claude_code": [], "codex": ["tools[type=namespace]", "tools[type=web_search]"]}
#: the agent's headers not sent as they came: the connection's own, credentials (the
#: rollout's secret goes in their place), and no compressed answer asked for
_NOT_SENT = SECRET_HEADERS | {"host", "content-length", "connection", "accept-encoding"}
CASES = [(name, target) for name in FIXTURE_NAMES for target in DIALECTS]


@asynccontextmanager
async def _gateway(
    base_url: str, dialect: str, unsupported: Literal["drop", "refuse"]
) -> AsyncIterator[Gateway]:
    fields = {"base_url": base_url, "model": MODEL, "dialect": dialect}
    endpoint = EndpointConfig.model_validate({**fields, "unsupported": unsupported})
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        yield gateway


async def _post(
    http: aiohttp.ClientSession, rollout: dict[str, Any], call: Captured, body: dict[str, Any]
) -> tuple[int, bytes]:
    """``body`` as the agent sent ``call``: its path (``?beta=true`` and all), its headers,
    the rollout's secret in its own credential header."""
    headers = {k: v for k, v in call.headers.items() if k not in _NOT_SENT}
    if "x-api-key" in call.headers:
        headers["x-api-key"] = rollout["api_key"]
    else:
        headers["authorization"] = f"Bearer {rollout['api_key']}"
    url = rollout["openai_base_url"].removesuffix("/v1") + call.path
    async with http.post(url, data=orjson.dumps(body), headers=headers) as resp:
        return resp.status, await resp.read()


def _table(call: Captured, target: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the upstream must receive of ``call``, and the rewrites the request event
    must name (set fields, then dropped ones, as the gateway records them)."""
    out = translate_request(call.fresh(), call.dialect, target)
    rewrites = apply_rewrites(target, out.body, MODEL, {})
    dropped = [*out.dropped, *dropped_headers(call.headers, call.dialect, target)]
    return out.body, rewrites + [d.rewrite() for d in dropped]


@pytest.mark.parametrize(("name", "target"), CASES)
async def test_every_recorded_call_passes_under_drop_as_the_table_says(
    name: str, target: str, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    calls = recorded(name)
    async with recording(sim.url) as (proxy, upstream), _gateway(
        proxy + "/v1", target, "drop"
    ) as gateway:  # fmt: skip
        rollout = await register(http, gateway)
        for call in calls:
            status, raw = await _post(http, rollout, call, call.body)
            assert status == 200, raw[:500]
        log = await events(http, gateway, rollout["id"])
    assert "model_error" not in [e["kind"] for e in log]
    requests = [e["payload"] for e in log if e["kind"] == "model_request"]
    received = model_calls(upstream.requests)
    assert len(requests) == len(received) == len(calls)
    for call, request, got in zip(calls, requests, received, strict=True):
        body, rewrites = _table(call, target)
        assert (request["dialect"], request["upstream_dialect"]) == (call.dialect, target)
        assert got["body"] == body
        assert _keyed(request["rewrites"]) == _keyed(rewrites)
        gone = {w["dropped"].removeprefix("header:") for w in rewrites if "dropped" in w}
        assert not gone & got["headers"].keys()
        assert got["headers"]["x-rolltap-rollout"] == rollout["id"]
    if target != calls[0].dialect:  # what a translation to another dialect always loses
        assert any("dropped" in w for w in requests[0]["rewrites"])


def _keyed(rewrites: list[dict[str, Any]]) -> list[bytes]:
    """Rewrites compared as a set (the gateway's order of set and dropped fields is its
    own), each entry whole."""
    return sorted(orjson.dumps(w, option=orjson.OPT_SORT_KEYS) for w in rewrites)


@pytest.mark.parametrize(("name", "target"), CASES)
async def test_refuse_answers_one_400_per_inexpressible_field_and_records_it(
    name: str, target: str, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    calls = recorded(name)
    want = REFUSED[calls[0].agent] if target != calls[0].dialect else []
    refused: list[str] = []
    outcomes: list[str] = []  # what each post must have recorded after its request event
    async with _gateway(sim.base_url, target, "refuse") as gateway:
        rollout = await register(http, gateway)
        for call in calls:
            body, named = call.fresh(), []
            for _ in range(len(want) + 1):
                status, raw = await _post(http, rollout, call, body)
                if status == 200:
                    break
                assert status == 400, raw[:500]
                named.append(orjson.loads(raw)["error"]["param"])
                remove(body, named[-1])
            assert named == want
            refused += named
            outcomes += ["model_error"] * len(named) + ["model_response"]
        log = await events(http, gateway, rollout["id"])
    assert sim.stats.requests == len(calls)  # a refused call is never sent
    calls_log = [e for e in log if e["kind"] in ("model_request", "model_error", "model_response")]
    # each post, refused or answered, is a request event followed by its outcome
    assert [e["kind"] for e in calls_log] == [k for o in outcomes for k in ("model_request", o)]
    errors = [e["payload"] for e in calls_log if e["kind"] == "model_error"]
    assert [e["field"] for e in errors] == refused
    assert {(e["code"], e["status"]) for e in errors} <= {("invalid_request", 400)}


@pytest.mark.parametrize(("name", "target"), CASES)
async def test_each_message_and_tool_list_is_recorded_once_and_each_call_rebuilds_as_sent(
    name: str, target: str, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    calls = recorded(name)
    async with _gateway(sim.base_url, target, "drop") as gateway:
        rollout = await register(http, gateway)
        for call in calls:
            status, raw = await _post(http, rollout, call, call.body)
            assert status == 200, raw[:500]
        log = await events(http, gateway, rollout["id"])
    requests = [e["payload"] for e in log if e["kind"] == "model_request"]
    rebuilt = sent_requests(Event(e["seq"], e["kind"], e["ts"], e["payload"]) for e in log)
    for call, got, p in zip(calls, rebuilt, requests, strict=True):
        key = CONVERSATION_KEYS[call.dialect]
        params = {k: v for k, v in call.body.items() if k != key}
        if p["upstream_dialect"] == p["dialect"]:  # a relay records the model it sent
            params["model"] = MODEL
        assert (got.messages, got.params) == (conversation_of(call.dialect, call.body), params)
    # each turn extends the last: only its new messages are stored, its tools once
    lengths = [len(c.messages or []) for c in rebuilt]
    assert [p["prefix_messages"] for p in requests] == [0, *lengths[:-1]]
    assert all("tools" in p.get("params_as_before", []) for p in requests[1:])
