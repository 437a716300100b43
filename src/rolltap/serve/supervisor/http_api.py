"""The service's HTTP API (aiohttp). Every route but ``/health`` needs the bearer token.

================================  ================================================================
route                             does
================================  ================================================================
``POST /rollouts``                submit a batch ``{"rollouts": [spec, …], "run_id"?, "run_name"?,
                                  "detach"?}``; answers NDJSON: ``accepted`` (batch, run, ids),
                                  one ``result`` per rollout as it finishes, ``keepalive`` lines
                                  while quiet, then ``end``. Closing the stream cancels what is
                                  still running unless ``detach``. 429 ``service_full`` when
                                  the workers lack room, 503 ``service_draining`` once draining.
``GET /rollouts/{id}``            running (and where) or finished (its result)
``DELETE /rollouts/{id}``         cancel one rollout (it ends ``cancelled``): 202
``DELETE /batches/{id}``          cancel every unfinished rollout of a batch: 202
``GET /status``                   workers (pid, state, load, latest stats), capacity, totals
``GET /metrics``                  Prometheus text
``GET /health``                   ``{"status": "ok"|"draining", "ready_workers": n}``
``GET /policy``                   each endpoint's policy version and pause, the workers' gates
``POST /policy``                  ``{"version", "endpoint"?}``: answered once every worker has it
``POST /pause``                   ``{"mode": "hold"|"drain"|"abort", "endpoint"?}`` on every
                                  worker (``drain``: once none has a call in flight)
``POST /resume``                  ``{"endpoint"?}``: held calls go, in arrival order
``GET /openapi.json``             this API as OpenAPI 3.1 (no token)
================================  ================================================================
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rolltap.dialects.chat.check import error_body
from rolltap.errors import InvalidRequestError, RolloutNotFoundError
from rolltap.gateway.policy_routes import PolicyAdmin, add_policy_routes
from rolltap.http.auth import AuthThrottle, check_bearer
from rolltap.http.body import read_body
from rolltap.http.errors import error_middleware
from rolltap.http.json_body import load_json_object
from rolltap.openapi import add_openapi_route, serve_document
from rolltap.serve.config import ServeConfig
from rolltap.serve.protocol import RolloutSpec
from rolltap.serve.supervisor.metrics import render_metrics
from rolltap.serve.supervisor.supervisor import Supervisor

__all__ = ["SERVICE", "ServiceView", "SubmitRequest", "build_app"]


class ServiceView(Protocol):
    """What the routes use of the service (:class:`rolltap.serve.supervisor.service.Service`,
    which builds this app: a protocol here, so the two modules do not import each other)."""

    config: ServeConfig
    token: str
    keepalive_s: float
    supervisor: Supervisor


SERVICE: web.AppKey[ServiceView] = web.AppKey("service")
THROTTLE: web.AppKey[AuthThrottle] = web.AppKey("auth_throttle")
_BODY_LIMIT = 64 * 1024 * 1024
#: how often a quiet result stream says it is alive (proxies cut silent streams)
KEEPALIVE_S = 15.0


class SubmitRequest(BaseModel):
    """The body of ``POST /rollouts``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rollouts: list[RolloutSpec] = Field(min_length=1)
    run_id: str | None = Field(default=None, min_length=1, max_length=64)
    run_name: str | None = None
    detach: bool = False


#: errors leave as ``{"error": {"message", "type", "code"}}`` with rolltap's code
_errors = error_middleware(lambda request: error_body)


def _service(request: web.Request) -> ServiceView:
    service = request.app[SERVICE]
    check_bearer(request, service.token, request.app[THROTTLE], what="service token")
    return service


def _policy(request: web.Request) -> PolicyAdmin:
    """What the policy routes drive (:mod:`rolltap.serve.supervisor.policy_fanout`),
    behind the service token like every other route."""
    return _service(request).supervisor.policy


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _line(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data) + b"\n"


def _submit_request(raw: bytes) -> SubmitRequest:
    try:
        return SubmitRequest.model_validate(load_json_object(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InvalidRequestError(first["msg"], field=field or None) from None


async def submit(request: web.Request) -> web.StreamResponse:
    service = _service(request)
    timeout_s = service.config.body_timeout_s
    body = _submit_request(await read_body(request, _BODY_LIMIT, timeout_s=timeout_s))
    supervisor = service.supervisor
    batch = await supervisor.submit(body.rollouts, run_id=body.run_id, run_name=body.run_name)
    resp = web.StreamResponse(
        headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"}
    )
    try:
        await resp.prepare(request)
        accepted = {"type": "accepted", "batch": batch.id, "run_id": batch.run_id}
        await resp.write(_line({**accepted, "rollouts": list(batch.jobs)}))
        async for result in batch.results(keepalive_s=service.keepalive_s):
            line = {"type": "keepalive"} if result is None else {"type": "result", **result}
            await resp.write(_line(line))
        await resp.write(_line({"type": "end", "batch": batch.id, "results": len(batch.jobs)}))
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the caller went away: what it left running is cancelled below
    finally:
        if not batch.finished and not body.detach:
            supervisor.cancel_batch(batch.id)
    return resp


async def get_rollout(request: web.Request) -> web.Response:
    return _json(_service(request).supervisor.rollout(request.match_info["id"]))


async def cancel_rollout(request: web.Request) -> web.Response:
    rollout_id = request.match_info["id"]
    if not _service(request).supervisor.cancel(rollout_id):
        raise RolloutNotFoundError(f"no running rollout {rollout_id!r}")
    return _json({"id": rollout_id, "state": "cancelling"}, status=202)


async def cancel_batch(request: web.Request) -> web.Response:
    batch_id = request.match_info["id"]
    count = _service(request).supervisor.cancel_batch(batch_id)
    return _json({"batch": batch_id, "cancelling": count}, status=202)


async def status(request: web.Request) -> web.Response:
    return _json(_service(request).supervisor.status())


async def metrics(request: web.Request) -> web.Response:
    supervisor = _service(request).supervisor
    return web.Response(
        body=render_metrics(supervisor.status),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


async def health(request: web.Request) -> web.Response:
    supervisor = request.app[SERVICE].supervisor
    state = "draining" if supervisor.draining else "ok"
    return _json({"status": state, "ready_workers": len(supervisor.worker_slots.ready())})


def build_app(service: ServiceView) -> web.Application:
    """The service's aiohttp application."""
    app = web.Application(middlewares=[_errors], client_max_size=_BODY_LIMIT)
    app[SERVICE] = service
    app[THROTTLE] = AuthThrottle(service.config.auth_failures_per_minute)
    app.router.add_post("/rollouts", submit)
    app.router.add_get("/rollouts/{id}", get_rollout)
    app.router.add_delete("/rollouts/{id}", cancel_rollout)
    app.router.add_delete("/batches/{id}", cancel_batch)
    app.router.add_get("/status", status)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    add_policy_routes(app, _policy)
    config = service.config
    document = serve_document(
        SubmitRequest, endpoints=[ep.name for ep in config.endpoints],
        max_batch=config.max_batch, test_hooks=config.test_hooks,
    )  # fmt: skip
    add_openapi_route(app, document)
    return app
