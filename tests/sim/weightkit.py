"""Helpers of the weight-update tests: the control routes, and streams read as they come."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from rolltap.sim import Simulator


async def control(
    session: aiohttp.ClientSession, sim: Simulator, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    """Call a control route; its status and JSON answer."""
    async with session.request(method, sim.url + path, json=body) as resp:
        return resp.status, await resp.json()


async def ok(
    session: aiohttp.ClientSession, sim: Simulator, method: str, path: str, body: Any = None
) -> Any:
    """Call a control route that must answer 200; its JSON answer."""
    status, answer = await control(session, sim, method, path, body)
    assert status == 200, answer
    return answer


async def events(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    """``(event name, parsed data)`` of each SSE event as it arrives (``[DONE]`` as the
    string ``"[DONE]"``), until the body ends."""
    name = ""
    async for line in resp.content:
        if line.startswith(b"event: "):
            name = line[len(b"event: ") :].strip().decode()
        elif line.startswith(b"data: "):
            data = line[len(b"data: ") :].strip()
            yield name, "[DONE]" if data == b"[DONE]" else orjson.loads(data)
            name = ""


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    """A non-stream model request's JSON answer (200)."""
    async with session.post(url, json=body) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> list[Any]:
    """A whole stream's event data, in order."""
    async with session.post(url, json=body) as resp:
        assert resp.status == 200, await resp.text()
        return [data async for _, data in events(resp)]
