"""The routes a trainer drives while rollouts run, on the gateway's admin API and on
``rolltap serve``'s (same paths, same bodies):

====================  ================================================================
``GET /policy``       each endpoint's version, pause and counters
``POST /policy``      ``{"version": "step-7", "endpoint": null}``: the current version
``POST /pause``       ``{"mode": "hold" | "drain" | "abort", "endpoint": null}``
``POST /resume``      ``{"endpoint": null}``: held calls go, in arrival order
====================  ================================================================

``endpoint`` names one endpoint; absent or null, every endpoint. Each answers with the
``GET /policy`` document after the change (``POST /pause`` with ``drain`` once nothing is
in flight; ``abort`` adds how many requests it cut).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import orjson
from aiohttp import web

from rolltap.errors import InvalidRequestError
from rolltap.gateway.policy import PauseMode, parse_pause_mode
from rolltap.http.body import read_body
from rolltap.http.json_body import load_json_object

__all__ = ["PolicyAdmin", "add_policy_routes", "read_policy_body"]

_BODY_LIMIT = 64 * 1024
_BODY_TIMEOUT_S = 30.0


class PolicyAdmin(Protocol):
    """What the policy routes drive: a :class:`~rolltap.gateway.gateway.Gateway`, or
    ``rolltap serve``'s service (which applies each change to every worker)."""

    def policy(self) -> dict[str, Any]: ...

    async def set_policy_version(
        self, version: str | None, *, endpoint: str | None = None
    ) -> dict[str, Any]: ...

    async def pause(self, mode: PauseMode, *, endpoint: str | None = None) -> dict[str, Any]: ...

    async def resume(self, *, endpoint: str | None = None) -> dict[str, Any]: ...


async def read_policy_body(request: web.Request, *fields: str) -> dict[str, Any]:
    """The JSON object of a policy route, with only ``fields`` (and ``endpoint``); each
    value checked (``version`` a string or null, ``mode`` a pause mode, ``endpoint`` a
    string or null)."""
    raw = await read_body(request, _BODY_LIMIT, timeout_s=_BODY_TIMEOUT_S)
    body = load_json_object(raw) if raw.strip() else {}
    allowed = {*fields, "endpoint"}
    for name, value in body.items():
        if name not in allowed:
            raise InvalidRequestError("unknown field", field=name)
        if name == "mode":
            body[name] = parse_pause_mode(value)
        elif value is not None and not isinstance(value, str):
            raise InvalidRequestError("must be a string or null", field=name)
    for name in fields:
        if name not in body:
            why = "is required (null clears it)" if name == "version" else "is required"
            raise InvalidRequestError(why, field=name)
    return body


def _json(data: Any) -> web.Response:
    return web.Response(body=orjson.dumps(data), content_type="application/json")


def add_policy_routes(app: web.Application, admin: Callable[[web.Request], PolicyAdmin]) -> None:
    """Add the policy routes to ``app``; ``admin(request)`` authenticates the request and
    returns what the routes drive."""

    async def get_policy(request: web.Request) -> web.Response:
        return _json(admin(request).policy())

    async def set_policy(request: web.Request) -> web.Response:
        target = admin(request)
        body = await read_policy_body(request, "version")
        return _json(
            await target.set_policy_version(body["version"], endpoint=body.get("endpoint"))
        )

    async def pause(request: web.Request) -> web.Response:
        target = admin(request)
        body = await read_policy_body(request, "mode")
        return _json(await target.pause(body["mode"], endpoint=body.get("endpoint")))

    async def resume(request: web.Request) -> web.Response:
        target = admin(request)
        body = await read_policy_body(request)
        return _json(await target.resume(endpoint=body.get("endpoint")))

    app.router.add_get("/policy", get_policy)
    app.router.add_post("/policy", set_policy)
    app.router.add_post("/pause", pause)
    app.router.add_post("/resume", resume)
