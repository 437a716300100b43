"""A harness's HTTP client (``ctx.http_client``): per rollout, on the run's shared session."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx2
import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from rolltap.rollouts.harness_http import harness_session, rollout_client
from rolltap.sim import Simulator


class _Server:
    """A server that tells which connection (client port) every request came on."""

    def __init__(self) -> None:
        self.peers: list[int] = []
        self.cookies: list[str | None] = []
        self.release = asyncio.Event()
        self.stream_gone = asyncio.Event()
        app = web.Application()
        app.router.add_get("/peer", self._peer)
        app.router.add_get("/hang", self._hang)
        app.router.add_get("/stream", self._stream)
        self.server = TestServer(app)

    def _seen(self, request: web.Request) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.peers.append(peer[1] if peer else -1)
        self.cookies.append(request.headers.get("Cookie"))

    async def _peer(self, request: web.Request) -> web.Response:
        self._seen(request)
        response = web.json_response({"n": len(self.peers)})
        response.set_cookie("who", f"c{len(self.peers)}")
        return response

    async def _hang(self, request: web.Request) -> web.Response:
        await self.release.wait()
        return web.json_response({})

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        self._seen(request)
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            await response.write(b"first\n")
            await self.release.wait()  # the client gives up before the rest
            await response.write(b"rest\n")
        except (ConnectionError, asyncio.CancelledError):
            self.stream_gone.set()
            raise
        return response

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))


@pytest.fixture
async def server() -> AsyncIterator[_Server]:
    served = _Server()
    await served.server.start_server()
    try:
        yield served
    finally:
        served.release.set()
        await served.server.close()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with harness_session(ssl.create_default_context()) as opened:
        yield opened


async def test_rollouts_reuse_the_runs_connections_and_keep_their_own_cookies(
    server: _Server, session: aiohttp.ClientSession
) -> None:
    async with rollout_client(session) as first:
        assert (await first.get(server.url("/peer"))).json() == {"n": 1}
        await first.get(server.url("/peer"))
    # the first rollout's client is closed, the run's connections are not
    assert not session.closed
    async with rollout_client(session) as second:
        await second.get(server.url("/peer"))
    assert len(set(server.peers)) == 1, server.peers  # one connection for all three
    # a rollout's cookies are its own: sent back by its client, never by another's
    assert server.cookies == [None, "who=c1", None]


async def test_a_response_left_unread_closes_its_connection(
    server: _Server, session: aiohttp.ClientSession
) -> None:
    async with rollout_client(session) as client:
        async with client.stream("GET", server.url("/stream")) as response:
            async for chunk in response.aiter_raw():
                assert chunk == b"first\n"
                break
        await asyncio.wait_for(server.stream_gone.wait(), 10)  # the server saw it go
        await client.get(server.url("/peer"))
    assert server.peers[0] != server.peers[1]  # the abandoned connection was not reused


async def test_errors_reach_the_sdk_as_its_own(
    server: _Server, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(httpx2.ConnectError) as refused:
        async with rollout_client(session) as client:
            await client.get("http://127.0.0.1:9/nothing-listens")
    assert isinstance(refused.value.__cause__, aiohttp.ClientConnectorError)
    async with rollout_client(session) as client:
        sdk = openai.AsyncOpenAI(
            base_url=server.url("/hang").rsplit("/", 1)[0], api_key="k",
            http_client=client, max_retries=0, timeout=0.2,
        )  # fmt: skip
        with pytest.raises(openai.APITimeoutError):
            await sdk.get("/hang", cast_to=object)


async def test_the_official_sdk_streams_through_it(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    async with rollout_client(session) as client:
        sdk = openai.AsyncOpenAI(
            base_url=sim.base_url, api_key="k", http_client=client, max_retries=0
        )
        stream = await sdk.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
        plain = await sdk.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "hi"}]
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and text == plain.choices[0].message.content
