"""Helpers the simulator tests share: request bodies and SSE reading."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

USER: list[dict[str, Any]] = [{"role": "user", "content": "Say something."}]


def chat_body(**extra: Any) -> dict[str, Any]:
    """A minimal chat-completions request body."""
    return {"model": "m", "messages": USER, **extra}


async def read_events(resp: aiohttp.ClientResponse, into: list[bytes] | None = None) -> list[bytes]:
    """The ``data:`` payloads of an SSE response, in order, until the body ends.

    Pass ``into`` to keep the events that arrived before the body failed.
    """
    events = [] if into is None else into
    async for line in resp.content:
        if line.startswith(b"data: "):
            events.append(line[len(b"data: ") :].rstrip(b"\n"))
    return events


def json_events(events: list[bytes]) -> list[dict[str, Any]]:
    """Parse every event but ``[DONE]``."""
    return [orjson.loads(e) for e in events if e != b"[DONE]"]
