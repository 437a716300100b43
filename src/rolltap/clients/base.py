"""What every model client shares: the protocol the pool and gateway rely on, URL joining."""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

__all__ = ["ModelClient", "join_url"]


@runtime_checkable
class ModelClient(Protocol):
    """A model client owned by the gateway's pool and shared by many rollouts.

    Clients never retry on their own: a failure surfaces to the harness and the trace.
    ``aclose()`` must be idempotent.
    """

    async def aclose(self) -> None: ...


_VERSION_SEGMENT = re.compile(r"^v\d+(?:alpha|beta)?\d*$")


def join_url(base_url: str, path: str) -> str:
    """Join an upstream base URL and a dialect path without duplicating a version segment.

    >>> join_url("https://host/api/v1", "/v1/chat/completions")
    'https://host/api/v1/chat/completions'
    >>> join_url("https://api.anthropic.com", "/v1/messages")
    'https://api.anthropic.com/v1/messages'
    >>> join_url("https://host/chat", "/v1/chat/completions")
    'https://host/chat/v1/chat/completions'
    """
    base = base_url.rstrip("/")
    parts = [p for p in path.split("/") if p]
    if parts and _VERSION_SEGMENT.match(parts[0]):
        last = base.rsplit("/", 1)[-1]
        # Only a version-shaped segment is deduplicated; a base ending in /chat keeps
        # /chat/completions whole.
        if _VERSION_SEGMENT.match(last):
            parts = parts[1:]
    return base + "/" + "/".join(parts)
