"""ModelCall driven by a scripted upstream: the one sequence every path takes.

A real gateway server (its harness routes, authentication, error middleware) carries one
rollout whose upstream is a :class:`~rolltap.clients.fake.FakeUpstream`; the harness is
raw aiohttp, so the bytes it gets are checked as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest

from rolltap.clients.fake import FakeReply, FakeUpstream
from rolltap.clients.relay import RelayClient
from rolltap.clients.upstream import Answer, Reply
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.dialects.canonical import Response, Text, Usage
from rolltap.dialects.registry import get_dialect
from rolltap.errors import InvalidRequestError, UpstreamConnectionError, UpstreamProtocolError
from rolltap.gateway.call import Path, path_of
from rolltap.gateway.context import GatewayContext
from rolltap.gateway.harness import add_harness_routes
from rolltap.gateway.rollout import Rollout
from rolltap.gateway.server import GatewayServer
from rolltap.gateway.stats import GatewayStats
from rolltap.http.auth import AuthThrottle
from rolltap.pool import Lease
from upstreams import CHAT_ANSWER

SECRET = "rt-test-secret"
CHAT_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _delta(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return _frame({"id": "c1", "model": "up", "choices": [choice]})


DONE = b"data: [DONE]\n\n"


@dataclass
class Harness:
    """The rollout, its fake upstream, and the URL prefix its harness calls."""

    rollout: Rollout
    fake: FakeUpstream
    base: str
    http: aiohttp.ClientSession

    def kinds(self) -> list[str]:
        return [e.kind for e in self.rollout.log]

    def payloads(self) -> list[dict[str, Any]]:
        return [dict(e.payload) for e in self.rollout.log]

    def post(self, route: str, body: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {SECRET}"}
        return self.http.post(self.base + route, json=body, headers=headers)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    settings = GatewaySettings(admin_token="t", keepalive_s=0.01)
    context = GatewayContext(settings, GatewayStats(), AuthThrottle())
    server = GatewayServer(context, max_body_bytes=settings.max_body_bytes)
    add_harness_routes(server.app)
    endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="up")
    # a real client that is never used: the rollout's upstream is the fake
    lease = Lease(RelayClient(endpoint, None), "key", "ro_test", lambda _: None)
    fake = FakeUpstream("chat")
    rollout = Rollout(
        id="ro_test", secret=SECRET, endpoint=endpoint, lease=lease, upstream=fake,
        server=server, session_id="ro_test",
    )  # fmt: skip
    server.place(rollout)
    await server.start("127.0.0.1", 0, None)
    try:
        async with aiohttp.ClientSession() as http:
            yield Harness(rollout, fake, f"{server.url}/r/{rollout.id}/v1", http)
    finally:
        await server.aclose()


async def test_a_body_is_delivered_and_recorded_after_its_request(harness: Harness) -> None:
    harness.fake.replies.append(FakeReply.json(CHAT_ANSWER, headers={"x-request-id": "up-1"}))
    async with harness.post("/chat/completions", CHAT_BODY) as resp:
        assert resp.status == 200
        assert resp.headers["x-request-id"] == "up-1"
        assert await resp.json() == CHAT_ANSWER  # passed through as it came
    assert harness.kinds() == ["model_request", "model_response"]
    request, response = harness.payloads()
    assert request["upstream_dialect"] == "chat" and request["rewrites"] == []
    assert response["body"] == CHAT_ANSWER and response["finish_reason"] == "stop"
    assert response["usage"] == CHAT_ANSWER["usage"]
    assert harness.rollout.total_tokens == 4
    assert harness.fake.requests[0].call.body["messages"] == CHAT_BODY["messages"]


async def test_a_stream_is_relayed_as_it_arrives_with_keepalives_in_silence(
    harness: Harness,
) -> None:
    first_read = asyncio.Event()
    harness.fake.replies.append(
        FakeReply.events(_delta("hel"), first_read, None, _delta("lo", "stop"), DONE)
    )
    async with harness.post("/chat/completions", {**CHAT_BODY, "stream": True}) as resp:
        assert resp.headers["Content-Type"] == "text/event-stream"
        # the upstream holds the rest until the first chunk has reached the harness
        assert await resp.content.readuntil(b"\n\n") == _delta("hel")
        first_read.set()
        rest = await resp.read()
    assert rest == b": keepalive\n\n" + _delta("lo", "stop") + DONE
    response = harness.payloads()[1]
    assert response["body"]["choices"][0]["message"]["content"] == "hello"
    assert response["chunks"] == 2


async def test_an_upstream_error_status_reaches_the_harness_in_its_dialect(
    harness: Harness,
) -> None:
    error = {"error": {"message": "slow down", "type": "rate_limit", "code": "rate"}}
    harness.fake.replies.append(FakeReply.json(error, status=429, headers={"Retry-After": "3"}))
    async with harness.post("/messages", {**CHAT_BODY, "max_tokens": 8}) as resp:
        assert resp.status == 429 and resp.headers["Retry-After"] == "3"
        body = await resp.json()
    assert body["type"] == "error" and body["error"]["code"] == "upstream_http_error"
    assert body["error"]["upstream"]["message"] == "slow down"
    assert harness.kinds() == ["model_request", "model_error"]
    assert orjson.loads(harness.payloads()[1]["upstream_body"]) == error


async def test_a_refused_call_is_recorded_after_its_request_and_not_retried(
    harness: Harness,
) -> None:
    refused = FakeReply(refuse=UpstreamConnectionError("connection refused"))
    harness.fake.replies.extend([refused, FakeReply.json(CHAT_ANSWER)])
    async with harness.post("/chat/completions", CHAT_BODY) as resp:
        assert resp.status == 502
        assert (await resp.json())["error"]["code"] == "upstream_unreachable"
    assert harness.kinds() == ["model_request", "model_error"]
    assert len(harness.fake.requests) == 1 and len(harness.fake.replies) == 1


async def test_a_stream_that_breaks_ends_with_an_in_band_error(harness: Harness) -> None:
    broken = UpstreamProtocolError("upstream connection broke")
    harness.fake.replies.append(FakeReply.events(_delta("hel"), broken))
    async with harness.post("/chat/completions", {**CHAT_BODY, "stream": True}) as resp:
        assert resp.status == 200
        wire = await resp.read()
    assert wire.startswith(_delta("hel"))
    error = orjson.loads(wire[len(_delta("hel")) :].removeprefix(b"data: "))
    assert error["error"]["code"] == "upstream_bad_response"
    assert harness.kinds() == ["model_request", "model_error"]


async def test_a_parsed_answer_is_streamed_to_a_harness_that_asked(harness: Harness) -> None:
    canonical = Response("r1", "up", (Text("hi there"),), "end_turn", Usage(3, 2))
    answer = Answer({"text": "hi there"}, b"{}", canonical, {"tokens": {"prompt_ids": [1]}})
    harness.fake.replies.append(FakeReply(kind="answer", answer=answer, pieces=(None, b"{}")))
    body = {**CHAT_BODY, "max_tokens": 8, "stream": True}
    async with harness.post("/messages", body) as resp:
        assert resp.headers["Content-Type"] == "text/event-stream"
        wire = await resp.read()
    assert wire.startswith(b"event: ping")  # the keepalive while the upstream was silent
    assert b'"text":"hi there"' in wire and b"event: message_stop" in wire
    response = harness.payloads()[1]
    assert response["body"] == {"text": "hi there"} and response["stop_reason"] == "end_turn"
    assert response["tokens"] == {"prompt_ids": [1]}
    assert response["usage"]["total_tokens"] == 5


async def test_a_call_the_upstream_cannot_express_records_its_request_and_error(
    harness: Harness,
) -> None:
    harness.fake.rewrite_error = InvalidRequestError("cannot say that", field="tools")
    async with harness.post("/chat/completions", CHAT_BODY) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["param"] == "tools"
    assert harness.kinds() == ["model_request", "model_error"]
    request, error = harness.payloads()
    assert (request["sent"], request["rewrites"]) == (False, [])
    assert request["messages"] == CHAT_BODY["messages"]
    assert error["field"] == "tools"
    assert harness.fake.requests == []


def _reply(kind: str, dialect: str) -> Reply:
    return Reply(200, {}, kind, get_dialect(dialect), None, Answer)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("harness_dialect", "kind", "upstream", "stream", "path"),
    [
        ("chat", "stream", "chat", True, Path(stream=True, relay=True, translate=False, chat=True)),
        ("messages", "stream", "messages", True, Path(True, True, False, False)),
        ("messages", "stream", "chat", True, Path(True, True, True, False)),
        ("chat", "body", "chat", True, Path(False, False, False, True)),
        ("responses", "body", "chat", False, Path(False, False, True, False)),
        ("chat", "answer", "chat", True, Path(True, False, True, False)),
        ("chat", "answer", "chat", False, Path(False, False, True, False)),
    ],
)
def test_the_path_is_decided_by_the_reply_and_the_dialects(
    harness_dialect: str, kind: str, upstream: str, stream: bool, path: Path
) -> None:
    assert path_of(get_dialect(harness_dialect), _reply(kind, upstream), stream=stream) == path
