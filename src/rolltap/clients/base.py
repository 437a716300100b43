"""What every model client shares: URL joining.

(The protocol the pool holds clients by, :class:`~rolltap.pool.client.ModelClient`, is
the pool's: a client satisfies it by shape, so neither part imports the other.)
"""

from __future__ import annotations

import re

__all__ = ["join_url"]


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
