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
from rolltap.gateway.context import GatewayContext
from rolltap.gateway.conversation import Found, conversation_of
from rolltap.gateway.replay import look_up, settle
from rolltap.gateway.rollout import Rollout
from rolltap.gateway.server import CONTEXT, SERVER
from rolltap.gateway.token_count import ESTIMATE_HEADER, count_tokens
from rolltap.http.body import read_body
from rolltap.http.json_body import parse_json_object

__all__ = ["ESTIMATE_HEADER", "PREFIX", "add_harness_routes", "answer_call"]

PREFIX = "/r/{rollout_id}/v1"


async def _read(
    request: web.Request, rollout: Rollout, dialect: Dialect, context: GatewayContext
) -> tuple[dict[str, Any], Found, bytes | None]:
    """The parsed body, what the rollout's conversations know of it, and the bytes too
    only when the gateway keeps them (benchmarks).

    The body is parsed once; the messages past the longest conversation the rollout sent
    before are validated (that prefix was, when it was sent). The bytes (MBs for a long
    multimodal history) must not stay referenced by the handler for the whole call.
    """
    settings = context.settings
    raw = await read_body(request, settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    body = parse_json_object(raw)
    found = rollout.conversations.find(conversation_of(dialect.name, body))
    dialect.validate_body(body, found.validated(dialect.name))
    return body, found, (None if settings.discard_intercepts else raw)


async def answer_call(
    request: web.Request, rollout: Rollout, dialect: Dialect, context: GatewayContext
) -> web.StreamResponse:
    """One authenticated model call of ``rollout``: its body read and parsed, then the
    call run to an outcome that is recorded and answered, then the observers told."""
    body, found, kept = await _read(request, rollout, dialect, context)
    context.stats.requests += 1
    lookup = look_up(rollout.replays, request.headers, body)
    context.stats.retries += lookup.retry_count > 0
    intercept = rollout.open_intercept()
    call = ModelCall(
        request, rollout, intercept, dialect, body, context.stats,
        keepalive_s=context.settings.keepalive_s, lookup=lookup, found=found,
    )  # fmt: skip
    del found  # the call drops it once the request is recorded (its dump is body-sized)
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
            max_bytes=context.settings.replay_max_bytes,
        )  # fmt: skip
        rollout.discard(intercept)
        if kept is not None and rollout.closed is None:
            rollout.retained.append(kept)
        if context.tracer is not None:
            context.tracer.call_ended(call)
        for observer in context.observers:
            observer.call_finished(rollout)


def _route(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    dialect = get_dialect(name)

    async def handler(request: web.Request) -> web.StreamResponse:
        rollout = request.app[SERVER].authenticate(request)
        return await answer_call(request, rollout, dialect, request.app[CONTEXT])

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
