"""SDK retries through the gateway: recorded as retries, linked to the call they repeat,
and — when the first answer arrived but could not be delivered — answered from it, with
one upstream call."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anthropic
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletionMessageParam

from gateway.policykit import admin
from helpers import GatewayFactory, events, openai_client, register, settle
from rolltap.dialects.canonical import Response, Text, Usage
from rolltap.gateway import Gateway
from rolltap.gateway.conversation import conversation_digest
from rolltap.gateway.replay import NOT_A_RETRY, Answer, Kept, ReplayBook, digest, look_up
from rolltap.sim import SimConfig, Simulator


def _stalling_tokens() -> int:
    """Completion tokens (of 5 bytes or more each) for an answer larger than the kernel
    buffers between the gateway and a harness that reads nothing can hold: Linux grows a
    socket's send buffer to at most ``tcp_wmem``'s maximum (4 MiB by default)."""
    try:
        most = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        most = 4 << 20
    return (2 * most + (4 << 20)) // 5


BIG = _stalling_tokens()
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "tell me everything"}]


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> Gateway:
    return await make_gateway(replay_max_bytes=16 * BIG)


@pytest.fixture
async def sim() -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=7, completion_tokens=BIG)) as simulator:
        yield simulator


def _kinds(log: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in log]


async def _undelivered_call(
    gateway: Gateway, rollout: dict[str, Any], body: bytes,
    while_stuck: Callable[[], Awaitable[object]] | None = None,
) -> str:  # fmt: skip
    """Send a call from a harness that reads nothing, wait until the gateway holds the
    whole answer and is stuck writing it, run ``while_stuck``, then reset the
    connection; the call's id."""
    live = next(r for r in gateway.rollouts() if r.id == rollout["id"])
    url = urlsplit(rollout["openai_base_url"] + "/chat/completions")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the window stays tiny
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, (url.hostname, url.port))
        head = (
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Bearer {rollout['api_key']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        await loop.sock_sendall(sock, head.encode() + body)
        await settle(lambda: any(e.kind == "model_response" for e in live.log))
        if while_stuck is not None:
            await while_stuck()
    finally:
        # SO_LINGER 0: close with a reset, as a harness whose timeout fired does at worst
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    await settle(lambda: any(e.kind == "model_error" for e in live.log))
    return str(live.log[0].payload["intercept_id"])


# gpt-4o-mini: the relay rewrites the model in place; the retry, sent as the original
# was, must still find it
@pytest.mark.parametrize("model", ["sim-model", "gpt-4o-mini"])
async def test_a_retry_after_a_dropped_delivery_is_answered_from_the_recorded_answer(
    gateway: Gateway, http: aiohttp.ClientSession, sim: Simulator, model: str
) -> None:
    rollout = await register(http, gateway)
    body = {"messages": MESSAGES, "model": model, "max_tokens": BIG}
    first = await _undelivered_call(gateway, rollout, orjson.dumps(body))
    assert sim.stats.requests == 1
    async with openai_client(rollout) as client:  # as the SDK's own retry sends it
        raw = await client.chat.completions.with_raw_response.create(
            messages=MESSAGES, model=model, max_tokens=BIG,
            extra_headers={"x-stainless-retry-count": "1"},
        )  # fmt: skip
    answer = raw.parse()
    assert raw.headers["x-rolltap-replay-of"] == first
    assert sim.stats.requests == 1  # the upstream sampled once
    log = await events(http, gateway, rollout["id"])
    assert _kinds(log) == [
        "model_request", "model_response", "model_error", "model_request", "model_response",
    ]  # fmt: skip
    original, error, retry, replay = log[1], log[2], log[3], log[4]
    assert error["payload"]["code"] == "harness_disconnected"
    assert (retry["payload"]["retry_count"], retry["payload"]["retry_of"]) == (1, first)
    assert (replay["payload"]["replay_of"], replay["payload"]["retry_count"]) == (first, 1)
    assert replay["payload"]["body"] == original["payload"]["body"]
    assert "tokens" not in replay["payload"]
    assert (
        answer.choices[0].message.content
        == original["payload"]["body"]["choices"][0]["message"]["content"]
    )
    stats = gateway.stats.as_dict()
    assert (stats["retries"], stats["replays"]) == (1, 1)
    # one retry, one replay: the same call sent again is sampled anew
    async with openai_client(rollout) as client:
        await client.chat.completions.create(
            messages=MESSAGES, model="sim-model", max_tokens=4,
        )  # fmt: skip
    assert sim.stats.requests == 2


async def test_an_answer_read_through_a_policy_update_carries_the_version_it_was_answered_under(
    gateway: Gateway, http: aiohttp.ClientSession, sim: Simulator
) -> None:
    # a harness slow to read its answer does not move it to weights set after it was
    # answered (the answer is recorded before it is written)
    assert (await admin(http, gateway, "POST", "/policy", {"version": "v1"}))[0] == 200
    rollout = await register(http, gateway)
    body = orjson.dumps({"messages": MESSAGES, "model": "sim-model", "max_tokens": BIG})
    await _undelivered_call(
        gateway, rollout, body, lambda: admin(http, gateway, "POST", "/policy", {"version": "v2"})
    )
    log = await events(http, gateway, rollout["id"])
    assert _kinds(log) == ["model_request", "model_response", "model_error"]
    assert log[1]["payload"]["policy_version"] == "v1"
    assert log[2]["payload"]["policy_version"] == "v2"  # the harness was gone under v2


async def test_a_drain_is_not_held_by_a_harness_slow_to_read_a_large_answer(
    gateway: Gateway, http: aiohttp.ClientSession, sim: Simulator
) -> None:
    # an answer over the connection's high-water mark may wait for the harness: it is
    # recorded, then written outside the calls a drain waits for
    rollout = await register(http, gateway)
    body = orjson.dumps({"messages": MESSAGES, "model": "sim-model", "max_tokens": BIG})
    answered: list[int] = []

    async def drain() -> None:
        answered.append((await admin(http, gateway, "POST", "/pause", {"mode": "drain"}))[0])
        answered.append((await admin(http, gateway, "POST", "/resume", {}))[0])

    await _undelivered_call(gateway, rollout, body, drain)
    assert answered == [200, 200]
    log = await events(http, gateway, rollout["id"])
    assert _kinds(log) == ["model_request", "model_response", "model_error"]


async def test_a_keyed_stream_is_replayed_as_a_stream(
    gateway: Gateway, http: aiohttp.ClientSession, sim: Simulator
) -> None:
    # a stream whose harness stops reading is not replayable (its upstream is cancelled with
    # it, DESIGN 4); a stream under an Idempotency-Key is, rendered again from its answer
    rollout = await register(http, gateway)
    texts: list[str] = []
    async with openai_client(rollout) as client:
        for _ in range(2):
            stream = await client.chat.completions.create(
                messages=MESSAGES, model="sim-model", max_tokens=12, stream=True,
                extra_headers={"Idempotency-Key": "turn-1"},
            )  # fmt: skip
            texts.append("".join([c.choices[0].delta.content or "" async for c in stream]))
    assert sim.stats.requests == 1
    assert texts[0] == texts[1] != ""
    log = await events(http, gateway, rollout["id"])
    assert log[-1]["payload"]["replay_of"] == log[0]["payload"]["intercept_id"]
    assert log[-1]["payload"]["stream"] is True


def _linked(log: list[dict[str, Any]]) -> list[tuple[int | None, str | None]]:
    """Each ``model_request``'s (``retry_count``, ``retry_of``), ``retry_of`` written as the
    index of the request it names."""
    requests = [e["payload"] for e in log if e["kind"] == "model_request"]
    index = {r["intercept_id"]: n for n, r in enumerate(requests)}
    return [(r.get("retry_count"), index.get(r.get("retry_of"), r.get("retry_of")))
            for r in requests]  # fmt: skip


@pytest.mark.parametrize("model", ["sim-model", "gpt-4o-mini"])
async def test_sdk_retries_of_a_failing_call_are_linked_each_to_the_one_before(
    model: str, gateway: Gateway, http: aiohttp.ClientSession, sim: Simulator
) -> None:
    # gpt-4o-mini: the relay rewrites the body in place (model -> sim-model) before the
    # first attempt fails, yet its retry sends the body as it was
    rollout = await register(http, gateway)
    async with openai_client(
        rollout, max_retries=2, default_headers={"x-sim-fault": "status=500"}
    ) as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(
                messages=MESSAGES, model=model, max_tokens=4,
            )  # fmt: skip
    assert sim.stats.requests == 3  # each retry reached the upstream: nothing to replay
    log = await events(http, gateway, rollout["id"])
    assert _kinds(log) == ["model_request", "model_error"] * 3
    assert _linked(log) == [(None, None), (1, 0), (2, 1)]


async def test_anthropic_sdk_retries_are_linked_when_the_upstream_rewrote_the_body(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession, sim: Simulator
) -> None:
    gateway = await make_gateway(dialect="messages")  # passed through, rewritten in place
    rollout = await register(http, gateway)
    async with anthropic.AsyncAnthropic(
        base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=2,
        default_headers={"x-sim-fault": "status=500"},
    ) as claude:  # fmt: skip
        with pytest.raises(anthropic.InternalServerError):
            await claude.messages.create(
                model="claude-test", max_tokens=4,
                messages=[{"role": "user", "content": "tell me everything"}],
            )  # fmt: skip
    assert sim.stats.requests == 3
    log = await events(http, gateway, rollout["id"])
    assert _kinds(log) == ["model_request", "model_error"] * 3
    assert _linked(log) == [(None, None), (1, 0), (2, 1)]


async def test_an_idempotency_key_is_answered_once(
    gateway: Gateway, http: aiohttp.ClientSession, sim: Simulator
) -> None:
    rollout = await register(http, gateway)
    key = {"Idempotency-Key": "turn-7"}
    async with openai_client(rollout) as client:
        one = await client.chat.completions.create(
            messages=MESSAGES, model="sim-model", max_tokens=8, extra_headers=key,
        )  # fmt: skip
        two = await client.chat.completions.create(
            messages=MESSAGES, model="sim-model", max_tokens=8, extra_headers=key,
        )  # fmt: skip
        with pytest.raises(openai.UnprocessableEntityError) as reused:
            await client.chat.completions.create(
                messages=[{"role": "user", "content": "something else"}], model="sim-model",
                max_tokens=8, extra_headers=key,
            )  # fmt: skip
    assert sim.stats.requests == 1
    assert two.choices[0].message.content == one.choices[0].message.content
    assert reused.value.code == "idempotency_key_reused"
    log = await events(http, gateway, rollout["id"])
    replay = [e for e in log if e["kind"] == "model_response"][-1]
    assert replay["payload"]["replay_of"] == log[0]["payload"]["intercept_id"]
    # the refused reuse is recorded too, never sent upstream
    assert [e["kind"] for e in log][-2:] == ["model_request", "model_error"]
    assert log[-1]["payload"]["code"] == "idempotency_key_reused"


async def test_a_bad_idempotency_key_is_a_400(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway()
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:
        with pytest.raises(openai.BadRequestError) as bad:
            await client.chat.completions.create(
                messages=MESSAGES, model="sim-model", max_tokens=8,
                extra_headers={"Idempotency-Key": "k" * 256},
            )  # fmt: skip
    assert bad.value.code == "invalid_request"


def _answer(nbytes: int) -> Answer:
    return Answer(200, Response("r", "m", (Text("hi"),), "end_turn", Usage()), {}, nbytes)


def test_the_replay_book_is_bounded_by_count_and_bytes() -> None:
    book = ReplayBook(max_entries=3, max_bytes=100)
    for i in range(5):
        book.remember(f"k{i}", Kept(f"c{i}", _answer(10)))
    assert len(book) == 3 and book.find("k0") is None and book.find("k4") is not None
    book.remember("big", Kept("cb", _answer(90)))
    assert book.nbytes <= 100 and book.find("k2") is None  # oldest gave way
    book.remember("huge", Kept("ch", _answer(101)))  # over the whole bound: linked only
    kept = book.find("huge")
    assert kept is not None and kept.answer is None and kept.call_id == "ch"
    book.forget("huge")
    book.forget("huge")  # idempotent
    assert book.find("huge") is None


def test_an_ordinary_call_is_not_digested() -> None:
    messages = [{"role": "user", "content": "hi"}]
    body: dict[str, Any] = {"model": "m", "messages": messages}
    conversation = conversation_digest(messages)
    ordinary = look_up(None, {}, "chat", body, conversation)
    assert (ordinary.retry_count, ordinary.retry_of, ordinary.request) == (0, None, "")
    # a copy of the other fields and the conversation's digest: not digested, and not
    # holding the conversation (the gateway lets go of it once the request is sent)
    assert ordinary.sent == {"model": "m"} and ordinary.conversation == conversation
    assert look_up(None, {"x-stainless-retry-count": "2"}, "chat", {}, b"").retry_count == 2
    assert look_up(None, {"x-stainless-retry-count": "x"}, "chat", {}, b"").retry_count == 0
    body["model"] = "rewritten"  # as a relay rewrites a body in place
    del body["messages"]  # as the gateway lets go of it
    assert ordinary.digest_of("chat", body) == digest("chat", {"model": "m", "messages": messages})
    assert NOT_A_RETRY.digest_of("chat", body) == digest("chat", body)
    # the digest is of the fields and the conversation, whatever their key order
    assert digest("chat", {"messages": [{"content": "hi", "role": "user"}], "model": "m"}) == (
        digest("chat", {"model": "m", "messages": messages})
    )
    assert digest("chat", {"model": "m", "messages": []}) != digest(
        "chat", {"model": "m"} | {"messages": messages}
    )
