"""A relayed call in flight holds its history once: once its request event is written and
its bytes are made, the parsed body lets go of the conversation (the history's size), so a
long agent's call waiting on the upstream costs the bytes sent, not those and a parsed
copy. Nothing is lost: the events record every message, a retry is still recognized."""

from __future__ import annotations

import asyncio
import gc
import io
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.policykit import Engine, engines_and_gateway, gateway_over
from helpers import events, register, settle
from rolltap.clients.sent_body import SentOnce
from rolltap.config import EndpointConfig
from upstreams import CHAT_ANSWER, serving

MARKER = "the first message, " + "x" * 64


def _holders(exclude: set[int]) -> int:
    """Lists alive in this process holding a message whose content is :data:`MARKER`
    (the parsed copies of the first message), but those in ``exclude``; garbage (cycles
    not yet collected) is collected first."""
    gc.collect()
    return sum(
        1
        for obj in gc.get_objects()
        if type(obj) is list and id(obj) not in exclude and any(_is_first(m) for m in obj)
    )


def _is_first(message: object) -> bool:
    return isinstance(message, dict) and message.get("content") == MARKER


def _messages_body(history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 16, "messages": history}


async def _post(http: aiohttp.ClientSession, url: str, key: str, body: bytes) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key,
               "Content-Type": "application/json", "anthropic-version": "2023-06-01"}  # fmt: skip
    # a file: aiohttp warns of raw bytes over 1 MB, which would fail the test's own client
    async with http.post(url, data=io.BytesIO(body), headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        answer: dict[str, Any] = await resp.json()
        return answer


@pytest.mark.parametrize("route", ["chat", "messages"])
async def test_a_call_waiting_on_the_upstream_holds_no_parsed_history(
    http: aiohttp.ClientSession, route: str
) -> None:
    """``chat`` is relayed as it came; ``messages`` is translated to the stand-in's chat
    (both the harness's body and its translation let go)."""
    async with engines_and_gateway() as ([stand_in], gateway):
        rollout = await register(http, gateway)
        base = rollout["openai_base_url"] if route == "chat" else rollout["anthropic_base_url"]
        url = base + ("/chat/completions" if route == "chat" else "/v1/messages")
        first = [{"role": "user", "content": MARKER}]
        history = [*first, {"role": "assistant", "content": "ok"},
                   {"role": "user", "content": "and then?"}]  # fmt: skip
        await _post(http, url, rollout["api_key"], orjson.dumps(_messages_body(first)))
        stand_in.release.clear()
        async with asyncio.TaskGroup() as tasks:
            body = orjson.dumps(_messages_body(history))
            call = tasks.create_task(_post(http, url, rollout["api_key"], body))
            await settle(lambda: len(stand_in.chats) == 2)
            # the test's own lists and the stand-in's parsed requests apart, the one
            # holder is the first call's request event (its messages, recorded once)
            mine = {id(first), id(history), *(_ids_of(stand_in))}
            held = _holders(mine)
            stand_in.release.set()
        assert call.result()
        recorded = await events(http, gateway, rollout["id"])
    assert held == 1
    requests = [e["payload"] for e in recorded if e["kind"] == "model_request"]
    assert [r["messages"] for r in requests] == [first, history[1:]]
    assert [r["prefix_messages"] for r in requests] == [0, 1]
    assert requests[1]["params"]["max_tokens"] == 16


def _ids_of(stand_in: Engine) -> list[int]:
    return [id(seen.body["messages"]) for seen in stand_in.chats]


@pytest.mark.parametrize(
    ("body", "model_sent"),
    [
        # nothing to change: the harness's bytes, spacing and key order and all
        (b'{ "messages": [{"content": "hi", "role": "user"}],   "model": "m" }', None),
        # a rewrite (the endpoint's model): the body re-encoded with it
        (b'{ "messages": [{"content": "hi", "role": "user"}], "model": "gpt-x" }', "m"),
    ],
)
async def test_a_relay_that_changes_nothing_sends_the_bytes_it_got(
    http: aiohttp.ClientSession, body: bytes, model_sent: str | None
) -> None:
    got: list[bytes] = []

    async def chat(request: web.Request) -> web.Response:
        got.append(await request.read())
        return web.json_response(CHAT_ANSWER)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    async with (
        serving(app) as url,
        gateway_over(EndpointConfig(base_url=url + "/v1", model="m")) as gateway,
    ):
        rollout = await register(http, gateway)
        await _post(http, rollout["openai_base_url"] + "/chat/completions", rollout["api_key"],
                    body)  # fmt: skip
        recorded = await events(http, gateway, rollout["id"])
    if model_sent is None:
        assert got == [body]
    else:
        assert orjson.loads(got[0]) == {**orjson.loads(body), "model": model_sent}
    (request,) = [e["payload"] for e in recorded if e["kind"] == "model_request"]
    assert request["messages"] == [{"content": "hi", "role": "user"}]


async def test_a_call_waiting_on_the_upstream_holds_none_of_its_bytes(
    http: aiohttp.ClientSession,
) -> None:
    """The bytes sent (the history's size again) are let go of once written: what a call
    waiting for its answer still has is an empty payload. The body is over aiohttp's
    1 MB mark for raw bytes, which warns (an error here) when sent as ``bytes``."""
    got: list[int] = []
    arrived, release = asyncio.Event(), asyncio.Event()

    async def chat(request: web.Request) -> web.Response:
        got.append(len(await request.read()))
        arrived.set()
        await release.wait()
        return web.json_response(CHAT_ANSWER)

    app = web.Application(client_max_size=8 << 20)
    app.router.add_post("/v1/chat/completions", chat)
    history = [{"role": "user", "content": MARKER + "y" * (2 << 20)}]
    body = orjson.dumps(_messages_body(history))
    async with (
        serving(app) as url,
        gateway_over(EndpointConfig(base_url=url + "/v1", model="m")) as gateway,
    ):
        rollout = await register(http, gateway)
        async with asyncio.TaskGroup() as tasks:
            call = tasks.create_task(
                _post(http, rollout["openai_base_url"] + "/chat/completions",
                      rollout["api_key"], body)
            )  # fmt: skip
            try:
                await arrived.wait()
                payloads = [obj for obj in gc.get_objects() if type(obj) is SentOnce]
            finally:
                release.set()
        assert call.result()
        recorded = await events(http, gateway, rollout["id"])
    assert got == [len(body)]
    assert payloads
    assert all(p.consumed and p.size == len(body) for p in payloads)
    (request,) = [e["payload"] for e in recorded if e["kind"] == "model_request"]
    assert request["messages"] == history


async def test_an_upstream_redirect_is_named_not_followed(http: aiohttp.ClientSession) -> None:
    """The body is not kept to send again: a redirect is a ``base_url`` to fix, said so."""
    seen: list[str] = []

    async def moved(request: web.Request) -> web.Response:
        seen.append(request.path)
        raise web.HTTPTemporaryRedirect("/v2/chat/completions")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", moved)
    app.router.add_post("/v2/chat/completions", moved)
    async with (
        serving(app) as url,
        gateway_over(EndpointConfig(base_url=url + "/v1", model="m")) as gateway,
    ):
        rollout = await register(http, gateway)
        async with http.post(
            rollout["openai_base_url"] + "/chat/completions",
            json=_messages_body([{"role": "user", "content": "hi"}]),
            headers={"Authorization": f"Bearer {rollout['api_key']}"},
        ) as resp:
            status, answer = resp.status, await resp.json()
        recorded = await events(http, gateway, rollout["id"])
    assert seen == ["/v1/chat/completions"]
    assert status == 502
    assert answer["error"]["code"] == "upstream_bad_response"
    assert "307" in answer["error"]["message"]
    assert "/v2/chat/completions" in answer["error"]["message"]
    assert "base_url" in answer["error"]["message"]
    (error,) = [e["payload"] for e in recorded if e["kind"] == "model_error"]
    assert error["code"] == "upstream_bad_response"
