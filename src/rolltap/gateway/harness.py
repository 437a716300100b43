"""Harness routes under ``/r/{rollout_id}/v1``: what agent SDKs talk to.

``POST /chat/completions`` (OpenAI chat), ``POST /messages`` and
``POST /messages/count_tokens`` (Anthropic; its SDK takes the rollout's
``anthropic_base_url`` and appends ``/v1/messages``), ``POST /responses`` (OpenAI
Responses) and ``GET /models``. Any of them reaches any upstream dialect. ``HEAD`` or
``GET`` on the bare ``/r/{rollout_id}`` (Claude Code probes its base URL at start) is
answered 200 with nothing, whatever the id.

A call relayed (the upstream speaks the harness's dialect) is checked only for what the
gateway itself reads (:mod:`rolltap.gateway.relay_body`); a translated one is validated in
its dialect. A call refused once its rollout is known is recorded
(:mod:`rolltap.gateway.refused`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from rolltap.dialects.canonical import Dialect
from rolltap.dialects.registry import get_dialect
from rolltap.errors import (
    HarnessDisconnectedError,
    InvalidRequestError,
    NotFoundError,
    RolltapError,
)
from rolltap.gateway.call import ModelCall
from rolltap.gateway.context import GatewayContext
from rolltap.gateway.conversation import After, Found, conversation_of
from rolltap.gateway.refused import Arrival
from rolltap.gateway.relay_body import check_relayed, is_relay
from rolltap.gateway.relay_splice import layout_of, read_past, splices
from rolltap.gateway.replay import digested, look_up
from rolltap.gateway.rollout import Rollout
from rolltap.gateway.server import CONTEXT, SERVER
from rolltap.gateway.token_count import ESTIMATE_HEADER, count_tokens
from rolltap.http.body import read_body
from rolltap.http.json_body import EncodedMembers, parse_json_object

__all__ = ["ESTIMATE_HEADER", "PREFIX", "add_harness_routes", "answer_call"]

PREFIX = "/r/{rollout_id}/v1"


async def _read(
    request: web.Request, arrival: Arrival, context: GatewayContext
) -> tuple[dict[str, Any], Found | After | None, bytes, EncodedMembers | None]:
    """The parsed body, what the rollout's conversations know of it (None: not looked
    up yet), its bytes and, relayed, its members written as it was checked (None: not
    checked whole); ``arrival`` learns each as it comes.

    The body is parsed once. A translated call is validated in its dialect past the
    longest conversation the rollout sent before (that prefix was, when it was sent). A
    relayed one is read past that prefix, found by its bytes, where it can be
    (:mod:`~rolltap.gateway.relay_splice`); else it is checked only for what the gateway
    reads, the whole body at C speed, and its conversation looked up once the request is
    on its way (with its request event), unless a retry's digest needs it first
    (:func:`~rolltap.gateway.replay.digested`). The bytes (MBs for a long multimodal
    history) must not stay referenced by the handler for the whole call: a relay that
    changes nothing sends them, else they go once the request is made (unless the
    gateway keeps them, for benchmarks).
    """
    settings, rollout, dialect = context.settings, arrival.rollout, arrival.dialect
    raw = await read_body(request, settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    arrival.size = len(raw)
    rollout.history_bytes = max(rollout.history_bytes, arrival.size)
    relayed = is_relay(dialect.name, rollout.upstream.name)
    digest_first = relayed and digested(rollout.replays, request.headers)
    splice = relayed and splices(rollout, whole_needed=digest_first or context.tracer is not None)
    if splice:
        try:
            spliced = read_past(raw, dialect.name, rollout)
        except InvalidRequestError:
            spliced = None  # read whole below: refused there, its body recorded
        if spliced is not None:
            # not ``arrival.body``: its conversation holds only the new messages (what
            # could refuse the call from here on is a closed rollout, which records nothing)
            context.stats.read_past += 1
            return spliced.body, spliced.after, raw, spliced.encoded
    body = arrival.body = parse_json_object(raw)
    found = None
    if not relayed or digest_first:
        conversation = conversation_of(dialect.name, body)
        found = rollout.conversations.find(conversation, dialect=dialect.name)
    start = 0 if found is None else found.validated(dialect.name)
    encoded = None
    if relayed:
        encoded = check_relayed(dialect.name, body, start)
        if splice:
            rollout.conversation_at = layout_of(raw, dialect.name, encoded)
    else:
        dialect.validate_body(body, start)
    return body, found, raw, encoded


async def answer_call(
    request: web.Request, rollout: Rollout, dialect: Dialect, context: GatewayContext
) -> web.StreamResponse:
    """One model call of ``rollout``: its secret checked, its body read and parsed, then
    the call run to an outcome that is recorded and answered, then the observers told.
    A step that refuses the call before it begins records it too (:class:`Arrival`)."""
    arrival = Arrival(rollout, dialect)
    try:
        request.app[SERVER].check(request, rollout)
        body, found, raw, encoded = await _read(request, arrival, context)
        kept = None if context.settings.discard_intercepts else raw
        context.stats.requests += 1
        conversation = found.identity if isinstance(found, Found) else None
        lookup = look_up(rollout.replays, request.headers, dialect.name, body, conversation)
        context.stats.retries += lookup.retry_count > 0
        intercept = rollout.open_intercept()
    except RolltapError as err:
        arrival.refuse(err, request.headers, context)
        raise  # answered by the error middleware, in the route's dialect
    call = ModelCall(
        request, rollout, intercept, dialect, body, context.stats,
        keepalive_s=context.settings.keepalive_s, lookup=lookup, found=found,
        arrived=arrival.started, raw=raw, encoded=encoded, deferred=context.deferred,
    )  # fmt: skip
    call.keep_body = context.tracer is not None  # it records the prompt at the call's end
    del found, raw, encoded  # the call drops them once used (each is body-sized)
    try:
        return await call.run()
    except RolltapError as err:
        return await call.fail(err)
    except ConnectionResetError:
        # The harness went away while we were writing to it.
        if not call.record_delivered():
            call.record_error(HarnessDisconnectedError("harness disconnected mid-response"))
        return call.response or web.Response(status=499)
    except asyncio.CancelledError:
        error = intercept.claim_cancellation()
        if error is None:
            # aiohttp cancels the handler when the harness disconnects; past the
            # stream's last event that is an agent done reading, not a lost answer
            if not call.record_delivered():
                call.record_error(HarnessDisconnectedError("harness disconnected"))
            raise
        return await call.fail(error)
    finally:
        rollout.replays = call.settle(rollout.replays, max_bytes=context.settings.replay_max_bytes)
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
        # the rollout first: a refusal from here on is recorded in its log
        rollout = request.app[SERVER].rollout_of(request)
        return await answer_call(request, rollout, dialect, request.app[CONTEXT])

    handler.__name__ = f"{name}_call"
    return handler


async def models(request: web.Request) -> web.Response:
    rollout = request.app[SERVER].authenticate(request)
    model = rollout.endpoint.model
    return web.json_response(
        {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "rolltap"}]}
    )


async def bare_base(request: web.Request) -> web.Response:
    """``HEAD``/``GET`` on a rollout's bare base URL: 200 and nothing else, for any id and
    without credentials (Claude Code probes its base URL before its first call), so it
    tells nobody whether the rollout exists."""
    return web.Response(status=200)


async def unknown(request: web.Request) -> web.Response:
    request.app[SERVER].authenticate(request)
    raise NotFoundError(f"no such route: {request.method} {request.path}")


def add_harness_routes(app: web.Application) -> None:
    app.router.add_post(PREFIX + "/chat/completions", _route("chat"))
    app.router.add_post(PREFIX + "/messages", _route("messages"))
    app.router.add_post(PREFIX + "/messages/count_tokens", count_tokens)
    app.router.add_post(PREFIX + "/responses", _route("responses"))
    app.router.add_get(PREFIX + "/models", models)
    app.router.add_get("/r/{rollout_id}", bare_base)  # and HEAD
    app.router.add_get("/r/{rollout_id}/", bare_base)
    app.router.add_route("*", PREFIX + "/{tail:.*}", unknown)
