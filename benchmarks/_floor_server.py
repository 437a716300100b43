"""One of server_floor.py's servers: reads each request's body whole, answers 200 with a
fixed chat answer, on uvloop, until terminated.

    python benchmarks/_floor_server.py KIND PORT

KIND: ``app`` (an aiohttp ``web.Application`` set up as the gateway's listener is: a
router of dynamic routes, one middleware, no access log, handler cancellation), ``low``
(aiohttp's low-level ``web.Server``: no application, router or middleware) or ``bare``
(an ``asyncio.Protocol`` parsing with llhttp through ``httptools``, as rolltap's own
upstream client does: keep-alive, Content-Length bodies; no limits, no chunked bodies,
no pipelining — a floor, not a server). ``GET /health`` answers 200 on each.
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

import httptools
import orjson
import uvloop
from aiohttp import web
from aiohttp.typedefs import Handler

ANSWER = orjson.dumps({
    "id": "chatcmpl-floor", "object": "chat.completion", "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "the answer " * 12}}],
    "usage": {"prompt_tokens": 900, "completion_tokens": 16, "total_tokens": 916},
})  # fmt: skip
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"


async def _answer(request: web.BaseRequest) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The gateway's listener has one middleware (its errors in the route's dialect):
    this one costs what a middleware layer costs a call, and answers nothing itself."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise


class _Bare(asyncio.Protocol):
    """One connection: each request's body gathered, answered when complete."""

    def __init__(self) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self._body: list[bytes] = []
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's: not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            assert self._transport is not None
            self._transport.close()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        b"".join(self._body)  # the body whole, as the others read it
        self._body.clear()
        assert self._transport is not None
        self._transport.writelines((_HEAD % len(ANSWER), ANSWER))


async def serve(kind: str, port: int) -> None:
    if kind == "bare":
        server = await asyncio.get_running_loop().create_server(_Bare, "127.0.0.1", port)
        async with server:
            await server.serve_forever()
        return
    if kind == "app":
        app = web.Application(middlewares=[_errors])
        app.router.add_get("/health", _answer)
        app.router.add_post("/r/{rollout_id}/v1/chat/completions", _answer)
        app.router.add_post("/r/{rollout_id}/v1/messages", _answer)
        app.router.add_route("*", "/r/{rollout_id}/v1/{tail:.*}", _answer)
        runner: web.BaseRunner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    else:
        low = web.Server(_answer, access_log=None, handler_cancellation=True)
        runner = web.ServerRunner(low)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()  # until the benchmark terminates the process
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    uvloop.run(serve(sys.argv[1], int(sys.argv[2])))
