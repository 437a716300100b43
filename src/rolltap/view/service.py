"""The Service page: a ``rolltap serve`` service's workers, memory, in-flight rollouts,
pool and replica stats, from its ``GET /status`` (token: ``ROLLTAP_SERVE_TOKEN``).

The token is sent to the service only; the page shows the status with anything that
looks like a credential hidden.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import web

from rolltap.errors import ServiceUnreachableError
from rolltap.view.base import page
from rolltap.view.config import SERVE_TOKEN_ENV
from rolltap.view.keys import CONFIG, HTTP
from rolltap.view.render import redact

__all__ = ["service_view", "split_status"]


def split_status(status: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(scalar fields, tables): lists of objects (workers, replicas) become tables."""
    scalars: dict[str, Any] = {}
    tables: dict[str, list[Any]] = {}
    for key, value in status.items():
        if isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
            tables[key] = value
        elif (
            isinstance(value, Mapping)
            and value
            and all(isinstance(v, Mapping) for v in value.values())
        ):
            tables[key] = [{"name": name, **v} for name, v in value.items()]
        else:
            scalars[key] = value
    return scalars, tables


async def _fetch(client: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    token = os.environ.get(SERVE_TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with client.get(f"{url.rstrip('/')}/status", headers=headers) as resp:
            if resp.status != 200:
                raise ServiceUnreachableError(
                    f"{url}/status answered HTTP {resp.status}"
                    + (f" (set {SERVE_TOKEN_ENV})" if resp.status == 401 else "")
                )
            body: dict[str, Any] = await resp.json()
            return body
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise ServiceUnreachableError(f"cannot read {url}/status: {type(exc).__name__}") from exc


async def service_view(request: web.Request) -> web.Response:
    url = request.app[CONFIG].serve
    if url is None:
        return page(request, "service.html", {"url": None, "scalars": {}, "tables": {}})
    status = redact(await _fetch(request.app[HTTP], url))
    scalars, tables = split_status(status)
    return page(request, "service.html", {"url": url, "scalars": scalars, "tables": tables})
