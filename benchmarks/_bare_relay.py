"""A bare aiohttp relay: the floor a recording gateway is measured against.

    python benchmarks/_bare_relay.py --port P --upstream http://127.0.0.1:Q [--loop uvloop]

Per call it parses the body, forwards it, parses the answer and responds, with no
validation or recording: the work any JSON-aware relay must do. On asyncio's loop, or
uvloop's (``--loop``, as rolltap's processes choose theirs), with the gateway's server
settings (no access log, handler cancellation) and client settings (one pooled session,
no auto-decompression). A stream is relayed chunk by chunk as it arrives. ``GET /health``
answers 200.
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp
import orjson
from aiohttp import web

_SESSION = web.AppKey("session", aiohttp.ClientSession)
_UPSTREAM = web.AppKey("upstream", str)


async def relay(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    session, url = request.app[_SESSION], request.app[_UPSTREAM] + request.path
    headers = {"Content-Type": "application/json"}
    if auth := request.headers.get("Authorization"):
        headers["Authorization"] = auth
    async with session.post(url, data=orjson.dumps(body), headers=headers) as up:
        if up.content_type == "text/event-stream":
            resp = web.StreamResponse(
                status=up.status, headers={"Content-Type": "text/event-stream"}
            )
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        answer = orjson.loads(await up.read())
        return web.Response(body=orjson.dumps(answer), status=up.status,
                            content_type="application/json")  # fmt: skip


async def health(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(port: int, upstream: str) -> None:
    app = web.Application(client_max_size=64 << 20)
    connector = aiohttp.TCPConnector(limit=1024, limit_per_host=0)
    session = aiohttp.ClientSession(
        connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent",)
    )
    app[_SESSION], app[_UPSTREAM] = session, upstream
    app.router.add_get("/health", health)
    app.router.add_post("/{tail:.*}", relay)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()  # until the benchmark terminates the process
    finally:
        await runner.cleanup()
        await session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    factory = None
    if args.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args.port, args.upstream))


if __name__ == "__main__":
    main()
