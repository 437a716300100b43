"""Harness routes under ``/r/{rollout_id}/v1``: what agent SDKs talk to.

``POST /chat/completions`` (OpenAI chat), ``POST /messages`` and
``POST /messages/count_tokens`` (Anthropic; its SDK takes the rollout's
``anthropic_base_url`` and appends ``/v1/messages``), ``POST /responses`` (OpenAI
Responses) and ``GET /models``. Any of them reaches any upstream dialect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from rolltap.dialects.registry import Dialect, get_dialect
from rolltap.errors import HarnessDisconnectedError, NotFoundError, RolltapError
from rolltap.gateway.call import ModelCall
from rolltap.gateway.replay import look_up, settle
from rolltap.gateway.server import GATEWAY, SERVER, read_body
from rolltap.gateway.token_count import ESTIMATE_HEADER, count_tokens
from rolltap.gateway.tokens import TokenCall

__all__ = ["ESTIMATE_HEADER", "add_harness_routes"]

PREFIX = "/r/{rollout_id}/v1"


async def _read(request: web.Request, dialect: Dialect) -> tuple[dict[str, Any], bytes | None]:
    """The parsed body; its bytes too only when the gateway keeps them (benchmarks).

    The bytes (MBs for a long multimodal history) must not stay referenced by the
    handler for the whole call.
    """
    settings = request.app[GATEWAY].settings
    raw = await read_body(request, settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    return dialect.validate_request(raw), (None if settings.discard_intercepts else raw)


async def _model_call(request: web.Request, dialect: Dialect) -> web.StreamResponse:
    gateway, server = request.app[GATEWAY], request.app[SERVER]
    rollout = server.authenticate(request)
    body, kept = await _read(request, dialect)
    gateway.stats.requests += 1
    lookup = look_up(rollout.replays, request.headers, body)
    gateway.stats.retries += lookup.retry_count > 0
    intercept = rollout.open_intercept()
    args = (request, rollout, intercept, dialect, body, gateway.stats)
    keepalive_s = gateway.settings.keepalive_s
    call: ModelCall
    if rollout.endpoint.client == "tokens":
        call = TokenCall(*args, keepalive_s=keepalive_s, renderers=gateway.renderers, lookup=lookup)
    else:
        call = ModelCall(*args, keepalive_s=keepalive_s, lookup=lookup)
    try:
        return await call.run()
    except RolltapError as err:
        return await call.fail(err)
    except ConnectionResetError:
        # The harness went away while we were writing to it.
        call.record_error(HarnessDisconnectedError("harness disconnected mid-response"))
        return call.response or web.Response(status=499)
    except asyncio.CancelledError:
        error = intercept.claim_cancellation()
        if error is None:
            # aiohttp cancels the handler when the harness disconnects.
            call.record_error(HarnessDisconnectedError("harness disconnected"))
            raise
        return await call.fail(error)
    finally:
        rollout.replays = settle(
            rollout.replays, lookup, call.outcome, body, call.answer_for_replay,
            max_bytes=gateway.settings.replay_max_bytes,
        )  # fmt: skip
        rollout.discard(intercept)
        if kept is not None and rollout.closed is None:
            rollout.retained.append(kept)
        if gateway.tracer is not None:
            gateway.tracer.call_ended(call)
        for observer in gateway.observers:
            observer.call_finished(rollout)


def _route(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    dialect = get_dialect(name)

    async def handler(request: web.Request) -> web.StreamResponse:
        return await _model_call(request, dialect)

    handler.__name__ = f"{name}_call"
    return handler


async def models(request: web.Request) -> web.Response:
    rollout = request.app[SERVER].authenticate(request)
    model = rollout.endpoint.model
    return web.json_response(
        {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "rolltap"}]}
    )


async def unknown(request: web.Request) -> web.Response:
    request.app[SERVER].authenticate(request)
    raise NotFoundError(f"no such route: {request.method} {request.path}")


def add_harness_routes(app: web.Application) -> None:
    app.router.add_post(PREFIX + "/chat/completions", _route("chat"))
    app.router.add_post(PREFIX + "/messages", _route("messages"))
    app.router.add_post(PREFIX + "/messages/count_tokens", count_tokens)
    app.router.add_post(PREFIX + "/responses", _route("responses"))
    app.router.add_get(PREFIX + "/models", models)
    app.router.add_route("*", PREFIX + "/{tail:.*}", unknown)
