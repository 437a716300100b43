"""Upstreams the tests put behind a gateway: an aiohttp app served on loopback
(:func:`serving`), a proxy in front of a real upstream that keeps every request it relays
and can hold its connections open past the answer (:class:`Recorder`, :func:`recording`),
and a whole chat answer (:data:`CHAT_ANSWER`).

``tests/agents/capture.py``, a script too, records the real agents through
:func:`recording`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

#: not forwarded as they came: the proxy's own connection and framing, and encodings
#: (aiohttp decodes what it receives, so the relayed answer is never compressed)
HOP_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding",
                         "transfer-encoding", "content-encoding"})  # fmt: skip

#: a whole chat-completions answer ("hello", 3 prompt and 1 completion tokens)
CHAT_ANSWER: dict[str, Any] = {
    "id": "c1", "object": "chat.completion", "model": "up",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}  # fmt: skip


@asynccontextmanager
async def serving(
    app: web.Application, *, handler_cancellation: bool = False
) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port until the block ends; its root URL (no
    ``/v1``). With ``handler_cancellation``, a handler is cancelled when its client hangs
    up (aiohttp's default leaves it running)."""
    runner = web.AppRunner(app, handler_cancellation=handler_cancellation)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@dataclass
class Recorder:
    """A logging proxy in front of ``upstream`` (a root URL, no ``/v1``): each request
    kept as it came (method, path, lower-cased headers, JSON body), then answered by the
    upstream, relayed as it streams. With ``hold``, the connection stays open past the
    answer until ``hold`` is set: the harness has every event before the upstream ends."""

    upstream: str
    hold: asyncio.Event | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(
            {"method": request.method, "path": request.path_qs, "headers": headers, "body": body}
        )
        forward = {k: v for k, v in headers.items() if k not in HOP_HEADERS}
        async with aiohttp.ClientSession() as session, session.request(
            request.method, self.upstream + request.path_qs, data=raw, headers=forward
        ) as answer:  # fmt: skip
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
            out = web.StreamResponse(status=answer.status, headers=kept)
            await out.prepare(request)
            async for chunk in answer.content.iter_any():
                await out.write(chunk)
        if self.hold is not None:
            await self.hold.wait()
        await out.write_eof()
        return out


@asynccontextmanager
async def recording(
    upstream: str, *, hold: asyncio.Event | None = None
) -> AsyncIterator[tuple[str, Recorder]]:
    """Serve a :class:`Recorder` in front of ``upstream`` (every method and path); its
    root URL and the recorder. With ``hold``, a handler whose client hangs up while held
    is cancelled."""
    recorder = Recorder(upstream, hold)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    async with serving(app, handler_cancellation=hold is not None) as url:
        yield url, recorder
