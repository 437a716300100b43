"""A relay is a relay: the body the upstream receives is the harness's, less the rewrites.

When the upstream speaks the harness's own dialect the gateway passes every field, role,
content-block type and tool type through whatever its value; it refuses only what it
could not read itself (not JSON, not an object, a conversation that is not a list). A
recording upstream (raw aiohttp, below) keeps each body as it arrived; the only
difference allowed is the documented rewrites — here ``model``, the run setting no
sampling, and no stream asked for unless the test says so.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import ADMIN_TOKEN
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway

T = TypeVar("T")
MODEL = "up-model"
FIXTURES = Path(__file__).parents[1] / "agents" / "fixtures"
#: each dialect's route and where its conversation is
ROUTES = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
KEYS = {"chat": "messages", "messages": "messages", "responses": "input"}
#: a header the recording upstream answers with instead of its usual answer
ANSWER_HEADER = "x-test-answer"
JSON_TYPE = "application/json"
ANSWERS: dict[str, dict[str, Any]] = {
    "chat": {
        "id": "c1", "object": "chat.completion", "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
    "messages": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    "responses": {
        "id": "resp_1", "object": "response", "created_at": 0, "status": "completed",
        "model": MODEL,
        "output": [{"id": "m1", "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    },
}  # fmt: skip


@dataclass
class Received:
    """One request as the recording upstream got it."""

    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


@dataclass
class Recorder:
    """An upstream of every dialect that keeps what it receives, by rollout."""

    received: dict[str, list[Received]] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.Response:
        rollout = request.headers.get("X-Rolltap-Rollout", "")
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        received = Received(request.path_qs, headers, orjson.loads(raw), raw)
        self.received.setdefault(rollout, []).append(received)
        if ANSWER_HEADER in request.headers:  # the test's own answer, relayed to here
            return web.Response(
                body=request.headers[ANSWER_HEADER].encode(), content_type=JSON_TYPE
            )
        dialect = {"/v1/messages": "messages", "/v1/responses": "responses"}.get(
            request.path, "chat"
        )
        return web.json_response(ANSWERS[dialect])

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses"):
            app.router.add_post(path, self.handle)
        return app


@dataclass
class Sent:
    """What one call through the gateway came to: the status, what the upstream
    received and the rollout's events."""

    status: int
    answer: bytes
    received: list[Received]
    events: list[tuple[str, dict[str, Any]]]


class Bench:
    """A recording upstream and one gateway per dialect relaying to it, on an event loop
    of their own (hypothesis drives a synchronous test, one call per example)."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.gateways: dict[str, Gateway] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def __enter__(self) -> Bench:
        self._thread.start()
        assert self._ready.wait(30), "the bench never started"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - the test thread re-raises it
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        runner = web.AppRunner(self.recorder.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        try:
            for dialect in ROUTES:
                endpoint = EndpointConfig(base_url=base, model=MODEL, dialect=dialect)
                gateway = Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN))
                await gateway.start()
                self.gateways[dialect] = gateway
            async with aiohttp.ClientSession() as self.http:
                self._ready.set()
                await self._stop.wait()
        finally:
            for gateway in self.gateways.values():
                await gateway.aclose()
            await runner.cleanup()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def send(
        self, dialect: str, raw: bytes, *, path: str = "", headers: Any = None, repeat: int = 1
    ) -> Sent:
        """POST ``raw`` (``repeat`` times) to a fresh rollout's ``dialect`` route (relayed),
        then unregister it; the last answer."""
        route = path or ROUTES[dialect]
        return self.run(self._send(dialect, raw, route, dict(headers or {}), repeat))

    async def _send(
        self, dialect: str, raw: bytes, path: str, headers: dict[str, str], repeat: int
    ) -> Sent:
        gateway = self.gateways[dialect]
        rollout = await gateway.register()
        url = gateway.describe(rollout)["base_url"] + path
        headers.setdefault("Authorization", f"Bearer {rollout.secret}")
        headers.setdefault("Content-Type", JSON_TYPE)
        try:
            for _ in range(repeat):
                async with self.http.post(url, data=raw, headers=headers) as resp:
                    status, answer = resp.status, await resp.read()
        finally:
            await gateway.unregister(rollout.id)
        received = self.recorder.received.pop(rollout.id, [])
        return Sent(status, answer, received, [(e.kind, dict(e.payload)) for e in rollout.log])


@pytest.fixture(scope="module")
def bench() -> Iterator[Bench]:
    with Bench() as bench:
        yield bench


def canonical_json(value: Any) -> bytes:
    """Compared byte for byte: ``true`` is not ``1``, ``1.0`` is not ``1``."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def relayed(sent: dict[str, Any]) -> dict[str, Any]:
    """What the upstream must receive of ``sent``: the documented rewrites applied."""
    return {**sent, "model": MODEL}


# -- random bodies ---------------------------------------------------------------------

#: the fields the gateway reads or rewrites (here: no sampling, no stream)
RESERVED = {"model", "stream", "stream_options", "messages", "input"}
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
)  # fmt: skip
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
UNKNOWN = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(lambda k: k not in RESERVED), JSON, max_size=4
)
ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "wizard"]) | st.text(
    max_size=10
)
TYPES = st.sampled_from(
    ["text", "image", "thinking", "server_tool_use", "web_search_call", "mcp_call", "reasoning"]
) | st.text(max_size=10)


def _typed(kind: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """An object of any ``type`` with unknown fields beside it."""
    return st.builds(lambda t, extra: {**extra, "type": t}, kind, UNKNOWN)


BLOCKS = st.lists(_typed(TYPES), max_size=3)
MESSAGE = st.builds(
    lambda role, content, extra: {**extra, "role": role, "content": content},
    ROLES, st.text(max_size=20) | BLOCKS | JSON, UNKNOWN,
)  # fmt: skip
ITEM = st.builds(lambda item, role: {**item, "role": role}, _typed(TYPES), ROLES) | MESSAGE
TOOLS = st.lists(
    _typed(st.sampled_from(["function", "web_search", "computer"]) | TYPES), max_size=3
)


def bodies(dialect: str) -> st.SearchStrategy[dict[str, Any]]:
    """Request bodies of ``dialect`` with unknown fields, roles, block and tool types."""
    conversation: st.SearchStrategy[Any] = st.lists(
        ITEM if dialect == "responses" else MESSAGE, max_size=4
    )
    if dialect == "responses":
        conversation = st.one_of(conversation, st.text(max_size=20))  # a string: one turn

    def build(extra: dict[str, Any], convo: Any, tools: list[Any], model: Any) -> dict[str, Any]:
        body = {**extra, KEYS[dialect]: convo}
        if tools:
            body["tools"] = tools
        if model is not None:
            body["model"] = model
        return body

    return st.builds(build, UNKNOWN, conversation, TOOLS, st.none() | st.text(max_size=8))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dialect", ["chat", "messages", "responses"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_relay_passes_any_body_through_apart_from_the_rewrites(
    bench: Bench, dialect: str, data: st.DataObject
) -> None:
    body = data.draw(bodies(dialect))
    sent = bench.send(dialect, orjson.dumps(body))
    assert sent.status == 200, sent.answer
    assert len(sent.received) == 1
    assert canonical_json(sent.received[0].body) == canonical_json(relayed(body))
    kinds = [kind for kind, _ in sent.events]
    assert kinds == ["model_request", "model_response"]
    request = sent.events[0][1]
    assert "sent" not in request
    assert [r["field"] for r in request["rewrites"]] == ["model"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "theirs", "messages": [], "model": "mine"}',
        b'{"mod\\u0065l": "theirs", "messages": [], "model": "mine"}',
        b'{"model": "mine", "messages": [], "mod\\u0065l": "theirs"}',
    ],
    ids=["twice", "escaped-first", "escaped-last"],
)
def test_a_model_written_twice_reaches_the_upstream_once_as_the_endpoints(
    bench: Bench, raw: bytes
) -> None:
    """A server that reads the first of two keys must not get the harness's model: a body
    the rewrites change is encoded again from what the gateway parsed, one ``model``, the
    endpoint's (docs/benchmarks.md: why it is not set in the harness's own bytes)."""
    sent = bench.send("chat", raw)
    assert sent.status == 200, sent.answer
    received = sent.received[0].raw
    assert received.count(b'"model"') == 1 and b"theirs" not in received
    assert orjson.loads(received)["model"] == MODEL


def test_a_chat_relay_stream_gets_only_include_usage_added(bench: Bench) -> None:
    body = {
        "messages": [{"role": "wizard", "content": [{"type": "hologram", "x": 1}]}],
        "model": MODEL, "stream": True, "stream_options": {"chunk_size": 3},
        "temperature": "hot", "tools": [{"type": "web_search", "filters": None}],
    }  # fmt: skip
    sent = bench.send("chat", orjson.dumps(body))
    assert sent.status == 200  # the upstream answered one body, not a stream
    expected = {**body, "stream_options": {"chunk_size": 3, "include_usage": True}}
    assert canonical_json(sent.received[0].body) == canonical_json(expected)


@pytest.mark.parametrize(
    ("dialect", "raw", "field"),
    [
        ("chat", b"[1, 2]", "body"),
        ("messages", b'"hello"', "body"),
        ("chat", b'{"messages": "hi"}', "messages"),
        ("messages", b'{"messages": {"role": "user"}}', "messages"),
        ("responses", b'{"input": 5}', "input"),
        ("chat", b'{"messages": [], "stream": true, "stream_options": "usage"}', "stream_options"),
        ("messages", b'{"messages": [' + b"[" * 130 + b"]" * 130 + b"]}", "body"),
    ],
)
def test_a_relay_refuses_only_what_the_gateway_cannot_read(
    bench: Bench, dialect: str, raw: bytes, field: str
) -> None:
    sent = bench.send(dialect, raw)
    assert sent.status == 400
    assert json.loads(sent.answer)["error"].get("param", "body") == field
    assert sent.received == []
    assert [kind for kind, _ in sent.events] == ["model_request", "model_error"]


def test_a_responses_string_input_is_relayed_as_it_came(bench: Bench) -> None:
    body = {"input": "hi", "model": "x", "reasoning": {"summary": "auto"}, "store": False}
    sent = bench.send("responses", orjson.dumps(body))
    assert sent.status == 200
    assert canonical_json(sent.received[0].body) == canonical_json(relayed(body))
    assert sent.events[0][1]["messages"] == [{"role": "user", "content": "hi"}]


def test_an_answer_the_canonical_model_cannot_read_is_relayed_as_it_came(bench: Bench) -> None:
    # a Messages answer with no usage and a block type of tomorrow: the relay delivers it,
    # records it, and keeps no replay of it (a keyed retry is answered by the upstream)
    answer = orjson.dumps(
        {"id": "m", "type": "message", "role": "assistant", "model": MODEL,
         "content": [{"type": "hologram", "frames": 3}], "stop_reason": "end_turn"}
    )  # fmt: skip
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    headers = {ANSWER_HEADER: answer.decode(), "Idempotency-Key": "k1"}
    sent = bench.send("messages", orjson.dumps(body), headers=headers, repeat=2)
    assert (sent.status, sent.answer) == (200, answer)
    assert len(sent.received) == 2
    kinds = [kind for kind, _ in sent.events]
    assert kinds == ["model_request", "model_response"] * 2
    response = sent.events[1][1]
    assert response["body"] == orjson.loads(answer) and response["usage"] is None


# -- what the real agents send -------------------------------------------------------

#: headers a captured request carried that any client sends afresh (or a credential)
_TRANSPORT = {"host", "content-length", "connection", "accept-encoding", "x-api-key",
              "authorization"}  # fmt: skip


def _captured(agent: str) -> dict[str, Any]:
    capture = json.loads((FIXTURES / f"{agent}.json").read_text())
    (post,) = [r for r in capture["requests"] if r["method"] == "POST"]
    return dict(post)


@pytest.mark.parametrize(
    ("agent", "dialect", "kept"),
    [
        ("claude_code", "messages",
         ["anthropic-beta", "anthropic-version", "x-claude-code-session-id", "x-app"]),
        ("codex", "responses", ["session-id", "x-codex-turn-metadata", "originator"]),
    ],
)  # fmt: skip
def test_a_real_agents_request_reaches_its_own_dialect_unchanged(
    bench: Bench, agent: str, dialect: str, kept: list[str]
) -> None:
    post = _captured(agent)
    headers = {k: v for k, v in post["headers"].items() if k not in _TRANSPORT}
    path = post["path"].removeprefix("/v1")  # Claude Code's is /v1/messages?beta=true
    sent = bench.send(dialect, orjson.dumps(post["body"]), path=path, headers=headers)
    assert sent.status == 200, sent.answer
    (received,) = sent.received
    assert canonical_json(received.body) == canonical_json(relayed(post["body"]))
    for name in kept:  # beta flags, session ids: passed on as they came
        assert received.headers[name] == post["headers"][name]
    request = sent.events[0][1]
    assert request["messages"] == post["body"][KEYS[dialect]]


async def _head(url: str, method: str) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http, http.request(method, url) as resp:
        return resp.status, await resp.read()


@pytest.fixture
async def gateway_url() -> AsyncIterator[tuple[Gateway, str]]:
    endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", model=MODEL, dialect="messages")
    async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
        rollout = await gateway.register()
        yield gateway, gateway.describe(rollout)["anthropic_base_url"]


@pytest.mark.parametrize("method", ["HEAD", "GET"])
async def test_the_bare_base_url_answers_200_and_tells_nothing(
    gateway_url: tuple[Gateway, str], method: str
) -> None:
    gateway, base = gateway_url
    # as Claude Code probes it at start: no credentials
    assert await _head(base, method) == (200, b"")
    assert await _head(base + "/", method) == (200, b"")
    unknown = base.rsplit("/", 1)[0] + "/ro_0000000000000000"
    assert await _head(unknown, method) == (200, b"")  # the same for a rollout that is not
    (rollout,) = gateway.rollouts()
    assert len(rollout.log) == 0
