"""Harness routes under ``/r/{rollout_id}/v1``: what agent SDKs talk to."""

from __future__ import annotations

import asyncio

from aiohttp import web

from rolltap.dialects.openai_chat import parse_request
from rolltap.errors import HarnessDisconnectedError, NotFoundError, RolltapError
from rolltap.gateway.chat import ChatCall
from rolltap.gateway.server import GATEWAY, SERVER, read_body

__all__ = ["add_harness_routes"]

PREFIX = "/r/{rollout_id}/v1"


async def chat_completions(request: web.Request) -> web.StreamResponse:
    gateway, server = request.app[GATEWAY], request.app[SERVER]
    rollout = server.authenticate(request)
    body = parse_request(await read_body(request, gateway.settings.max_body_bytes))
    gateway.stats.requests += 1
    intercept = rollout.open_intercept()
    call = ChatCall(request, rollout, intercept, body, gateway.stats)
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
        rollout.discard(intercept)
        for observer in gateway.observers:
            observer.call_finished(rollout)


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
    app.router.add_post(PREFIX + "/chat/completions", chat_completions)
    app.router.add_get(PREFIX + "/models", models)
    app.router.add_route("*", PREFIX + "/{tail:.*}", unknown)
