"""What the policy tests share (``test_policy_*.py``): a stand-in engine the test
controls, a gateway in front of it, and the trainer's side of the admin API.

The stand-in (:class:`Engine`) answers chat completions whole, each only once
``release`` is set (so a test knows which calls are in flight), with the weight version
it is told to report in ``metadata.weight_version`` as SGLang does; it answers every other
``POST`` (vLLM's ``/pause``, SGLang's ``/pause_generation``, …) with ``{}`` and the status
``statuses`` names for its path (200 by default). It keeps every request it got, in the
order it got them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import openai
from aiohttp import web

from helpers import ADMIN_HEADERS, ADMIN_TOKEN
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from upstreams import CHAT_ANSWER, serving

T = TypeVar("T")


@dataclass(frozen=True)
class Seen:
    """One request the stand-in got."""

    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class Engine:
    """A stand-in inference engine (see the module's docstring)."""

    #: what its answers report as their weights (None: nothing, as a relay upstream)
    weight_version: str | None = None
    #: chat answers wait for it (set: they answer at once)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    #: the status each control path answers with (absent: 200)
    statuses: dict[str, int] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self.release.set()

    @property
    def chats(self) -> list[Seen]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def control(self) -> list[tuple[str, str, dict[str, str], Any]]:
        """The control requests it got (all but chat completions), as tuples."""
        return [
            (r.method, r.path, r.query, r.body)
            for r in self.requests
            if r.path != "/v1/chat/completions"
        ]

    async def _seen(self, request: web.Request) -> Seen:
        raw = await request.read()
        seen = Seen(request.method, request.path, dict(request.query),
                    json.loads(raw) if raw else None)  # fmt: skip
        self.requests.append(seen)
        return seen

    async def chat(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        await self.release.wait()
        content = seen.body["messages"][-1]["content"]
        message = {"role": "assistant", "content": f"re: {content}"}
        answer: dict[str, Any] = {**CHAT_ANSWER}
        answer["choices"] = [{**CHAT_ANSWER["choices"][0], "message": message}]
        if self.weight_version is not None:
            answer["metadata"] = {"weight_version": self.weight_version}
        return web.json_response(answer)

    async def other(self, request: web.Request) -> web.Response:
        await self._seen(request)
        return web.json_response({}, status=self.statuses.get(request.path, 200))


@asynccontextmanager
async def engine(**fields: Any) -> AsyncIterator[Engine]:
    """An :class:`Engine` served on loopback; its ``url`` is its root."""
    stand_in = Engine(**fields)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", stand_in.chat)
    app.router.add_route("*", "/{tail:.*}", stand_in.other)
    # a call the gateway gives up on ends its handler, as an engine notices a client gone
    async with serving(app, handler_cancellation=True) as url:
        stand_in.url = url
        try:
            yield stand_in
        finally:
            stand_in.release.set()  # nothing left waiting when the server shuts down


@asynccontextmanager
async def gateway_over(
    endpoints: EndpointConfig | Sequence[EndpointConfig], **settings: Any
) -> AsyncIterator[Gateway]:
    """A started gateway in front of ``endpoints``, the test's admin token its own."""
    async with Gateway(endpoints, GatewaySettings(admin_token=ADMIN_TOKEN, **settings)) as gw:
        yield gw


@asynccontextmanager
async def engines_and_gateway(
    count: int = 1, *, endpoint: dict[str, Any] | None = None, **settings: Any
) -> AsyncIterator[tuple[list[Engine], Gateway]]:
    """``count`` stand-ins as one endpoint (its ``replicas`` when more than one) with the
    ``endpoint`` fields, and a gateway in front of them."""
    async with AsyncExitStack() as stack:
        stand_ins = [await stack.enter_async_context(engine()) for _ in range(count)]
        urls = [e.url + "/v1" for e in stand_ins]
        where: dict[str, Any] = {"base_url": urls[0]} if count == 1 else {"replicas": urls}
        ep = EndpointConfig(model="m", **where, **(endpoint or {}))
        gw = await stack.enter_async_context(gateway_over(ep, **settings))
        yield stand_ins, gw


async def admin(
    http: aiohttp.ClientSession, gateway: Gateway, method: str, path: str,
    body: Any = None, *, raw: bytes | None = None, token: bool = True,
) -> tuple[int, Any]:  # fmt: skip
    """A trainer's admin call: its status and JSON answer."""
    headers = ADMIN_HEADERS if token else {}
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    async with http.request(method, gateway.admin_url + path, data=data, headers=headers) as r:
        return r.status, await r.json()


async def outcome(call: Awaitable[T]) -> T | openai.APIStatusError:
    """What ``call`` answered, or the error status the SDK raised (a task of a task group
    that fails would cancel the test)."""
    try:
        return await call
    except openai.APIStatusError as exc:
        return exc


def gate(gateway: Gateway, endpoint: str = "default") -> dict[str, Any]:
    """An endpoint's gate as ``GET /policy`` shows it (in Python: no request in between)."""
    gates: dict[str, Any] = gateway.policy()["endpoints"]
    return dict(gates[endpoint])


def of_kind(log: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The payloads of ``log``'s events of ``kind``."""
    return [e["payload"] for e in log if e["kind"] == kind]


def answered_now(gateway: Gateway, rollouts: Sequence[dict[str, Any]]) -> list[int]:
    """How many answers each of ``rollouts`` has recorded, read in place (no request, so
    nothing else runs before the caller has the numbers)."""
    return [sum(e.kind == "model_response" for e in gateway.get(r["id"]).log) for r in rollouts]
