"""The admin API, served on the gateway's first server.

``POST /rollouts`` registers a rollout, ``GET /rollouts/{id}/events`` reads its events,
``DELETE /rollouts/{id}`` unregisters it, ``GET /stats`` and ``GET /metrics`` report.
Every admin route needs ``Authorization: Bearer <admin token>``, except
``GET /openapi.json`` (this API as OpenAPI 3.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import orjson
from aiohttp import web

from rolltap.config import GatewaySettings
from rolltap.errors import InvalidRequestError
from rolltap.gateway.limits import RolloutLimits
from rolltap.gateway.observer import RolloutObserver, history_of
from rolltap.gateway.policy_routes import PolicyAdmin, add_policy_routes
from rolltap.gateway.rollout import Rollout
from rolltap.gateway.stats import render_metrics
from rolltap.http.auth import AuthThrottle, check_bearer
from rolltap.http.body import read_body
from rolltap.http.json_body import load_json_object
from rolltap.openapi import add_openapi_route, admin_document

__all__ = ["ADMIN", "Admin", "add_admin_routes"]


class Admin(PolicyAdmin, Protocol):
    """What the admin routes manage: the :class:`~rolltap.gateway.gateway.Gateway` (its
    policy routes' methods are :class:`~rolltap.gateway.policy_routes.PolicyAdmin`'s)."""

    admin_token: str
    auth_throttle: AuthThrottle
    settings: GatewaySettings
    #: told of every rollout (one may keep released events: :func:`history_of`)
    observers: list[RolloutObserver]

    async def register(
        self,
        *,
        user: str | None = None,
        api_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        endpoint: str | None = None,
        limits: RolloutLimits | None = None,
        sampling: dict[str, Any] | None = None,
    ) -> Rollout: ...

    def get(self, rollout_id: str) -> Rollout: ...

    def rollouts(self) -> list[Rollout]: ...

    async def unregister(self, rollout_id: str) -> Rollout: ...

    def describe(self, rollout: Rollout, *, secret: bool = True) -> dict[str, Any]: ...

    def snapshot(self) -> dict[str, Any]: ...


ADMIN: web.AppKey[Admin] = web.AppKey("admin")

_REGISTER_FIELDS = {
    "user": str,
    "api_key": str,
    "metadata": dict,
    "endpoint": str,
    "limits": dict,
    "sampling": dict,
}
_LIMIT_FIELDS = {"max_turns": "an integer", "max_tokens": "an integer", "timeout_s": "a number"}
_ADMIN_BODY_LIMIT = 1024 * 1024


def _gateway(request: web.Request) -> Admin:
    gateway = request.app[ADMIN]
    check_bearer(request, gateway.admin_token, gateway.auth_throttle, what="admin token")
    return gateway


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def _register_args(request: web.Request) -> dict[str, Any]:
    timeout_s = request.app[ADMIN].settings.body_timeout_s
    raw = await read_body(request, _ADMIN_BODY_LIMIT, timeout_s=timeout_s)
    if not raw.strip():
        return {}
    body = load_json_object(raw)
    for name, value in body.items():
        expected = _REGISTER_FIELDS.get(name)
        if expected is None:
            raise InvalidRequestError("unknown field", field=name)
        if value is not None and not isinstance(value, expected):
            raise InvalidRequestError(f"must be {expected.__name__}", field=name)
    args = {k: v for k, v in body.items() if v is not None}
    if "limits" in args:
        args["limits"] = _limits(args["limits"])
    return args


def _limits(raw: dict[str, Any]) -> RolloutLimits:
    for name, value in raw.items():
        kind = _LIMIT_FIELDS.get(name)
        if kind is None:
            raise InvalidRequestError("unknown field", field=f"limits.{name}")
        if value is None:
            continue
        integral = kind == "an integer"
        if integral and isinstance(value, float) and value.is_integer():
            # JSON Schema's integer (the /openapi.json document) includes 1.0
            value = raw[name] = int(value)
        allowed = int if integral else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed) or value <= 0:
            raise InvalidRequestError(f"must be {kind} > 0", field=f"limits.{name}")
    return RolloutLimits(**raw)


async def create_rollout(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    rollout = await gateway.register(**await _register_args(request))
    return _json(gateway.describe(rollout), status=201)


async def rollout_events(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    rollout = gateway.get(request.match_info["rollout_id"])
    since = request.query.get("since", "0")
    if not since.isdigit():
        raise InvalidRequestError("must be a non-negative integer", field="since")
    start = int(since)
    if start < rollout.log.released:  # their messages are in the store now
        events = (await history_of(rollout, gateway.observers))[start:]
    else:
        events = rollout.log.since(start)
    return _json({"events": [e.to_dict() for e in events]})


async def delete_rollout(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    rollout = await gateway.unregister(request.match_info["rollout_id"])
    return _json({"id": rollout.id, "status": "unregistered", "events": len(rollout.log)})


async def list_rollouts(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    return _json({"rollouts": [gateway.describe(r, secret=False) for r in gateway.rollouts()]})


async def stats(request: web.Request) -> web.Response:
    return _json(_gateway(request).snapshot())


async def metrics(request: web.Request) -> web.Response:
    gateway = _gateway(request)
    return web.Response(
        body=render_metrics(gateway.snapshot),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def add_admin_routes(app: web.Application, admin: Admin, *, endpoints: Sequence[str] = ()) -> None:
    """The admin routes over ``admin``; ``endpoints`` (the gateway's names) are documented
    as the values ``POST /rollouts`` takes for ``endpoint``."""
    app[ADMIN] = admin
    app.router.add_post("/rollouts", create_rollout)
    app.router.add_get("/rollouts", list_rollouts)
    app.router.add_get("/rollouts/{rollout_id}/events", rollout_events)
    app.router.add_delete("/rollouts/{rollout_id}", delete_rollout)
    app.router.add_get("/stats", stats)
    app.router.add_get("/metrics", metrics)
    add_policy_routes(app, _gateway)
    add_openapi_route(app, admin_document(endpoints))
