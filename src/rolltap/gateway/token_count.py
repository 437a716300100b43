"""``POST /messages/count_tokens``: the upstream's count or an estimate, recorded as a
``token_count`` event.

A Messages upstream counts (the request is relayed with the endpoint's ``model``); no
other dialect can, so the gateway estimates
(:func:`~rolltap.dialects.messages.dialect.estimate_tokens`) and flags the answer with
``x-rolltap-token-count: estimate``. A count holds an intercept like a model call
(unregistering the rollout answers it ``rollout_closed``), but it is not a turn: no limit
counts it, and its messages do not enter the rollout's conversation index, so later request
events store their messages as if the count had not happened.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from aiohttp import web

from rolltap.clients.relay import relayed_headers
from rolltap.dialects.messages import dialect as anthropic_messages
from rolltap.errors import HarnessDisconnectedError, RolltapError, http_status_of
from rolltap.events import EventKind
from rolltap.gateway.conversation import conversation_of
from rolltap.gateway.rollout import Intercept, Rollout
from rolltap.gateway.server import CONTEXT, SERVER
from rolltap.http.body import read_body
from rolltap.http.errors import error_response
from rolltap.http.json_body import load_json_object

__all__ = ["ESTIMATE_HEADER", "TokenCount", "count_tokens"]

#: set on a count_tokens answer that rolltap estimated rather than the upstream counted
ESTIMATE_HEADER = "x-rolltap-token-count"
_PATH = "/v1/messages/count_tokens"
_MAX_ERROR_BODY = 4096


class TokenCount:
    """One count_tokens call; :meth:`record` appends its event once it has an outcome."""

    def __init__(self, rollout: Rollout, intercept: Intercept, body: dict[str, Any]) -> None:
        self.rollout, self.intercept, self.body = rollout, intercept, body
        self.source = "upstream" if rollout.endpoint.dialect == "messages" else "estimate"
        self.t_headers: float | None = None
        self.rewrites: list[dict[str, Any]] = []
        # matched now, before a concurrent model call can extend the index
        conversation = conversation_of("messages", body)
        match = rollout.conversations.match(conversation, remember=False, dialect="messages")
        self._request: dict[str, Any] = {
            **match.fields(),
            "messages": conversation[match.length :],
            "params": {k: v for k, v in body.items() if k != "messages"},
        }

    async def answer(self, request: web.Request) -> web.Response:
        if self.source == "estimate":
            canonical = anthropic_messages.to_canonical(self.body)
            count = anthropic_messages.estimate_tokens(canonical)
            self.record(200, count)
            return web.json_response({"input_tokens": count}, headers={ESTIMATE_HEADER: "estimate"})
        model = self.rollout.endpoint.model
        if self.body.get("model") != model:
            self.rewrites.append({"field": "model", "from": self.body.get("model"), "to": model})
        data = orjson.dumps({**self.body, "model": model})
        rollout = self.rollout
        async with rollout.client.send(_PATH, data, request.headers, rollout_id=rollout.id) as up:
            self.t_headers = time.perf_counter()
            raw = await up.read()
        if up.status >= 400:
            text = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
            self.record(up.status, None, upstream_body=text)
        else:
            self.record(up.status, _input_tokens(raw))
        # an upstream error status is passed through as it came, body and all
        return web.Response(
            body=raw, status=up.status, headers=relayed_headers(up.headers),
            content_type="application/json",
        )  # fmt: skip

    def record(self, status: int, input_tokens: int | None, **extra: Any) -> None:
        """Append the ``token_count`` event (docs/events.md)."""
        t0, now = self.intercept.started, time.perf_counter()
        timing = {"total_ms": round((now - t0) * 1000.0, 3)}
        if self.t_headers is not None:
            timing["ttfb_ms"] = round((self.t_headers - t0) * 1000.0, 3)
        self.rollout.log.append(
            EventKind.TOKEN_COUNT,
            {
                "intercept_id": self.intercept.id,
                "route": "messages.count_tokens",
                "dialect": "messages",
                "upstream_dialect": self.rollout.endpoint.dialect,
                **self._request,
                "rewrites": self.rewrites,
                "source": self.source,
                "status": status,
                "input_tokens": input_tokens,
                "timing": timing,
                **extra,
            },
        )

    def record_error(self, err: RolltapError) -> None:
        self.record(http_status_of(err), None, error={"code": err.code, "message": err.message})


def _input_tokens(raw: bytes) -> int | None:
    """The answer's ``input_tokens``; None when the upstream's body has none."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = parsed.get("input_tokens") if isinstance(parsed, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def count_tokens(request: web.Request) -> web.Response:
    """Anthropic's token count: the upstream's when it speaks Messages, else an estimate."""
    context, server = request.app[CONTEXT], request.app[SERVER]
    rollout = server.authenticate(request)
    settings = context.settings
    raw = await read_body(request, settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    body = load_json_object(raw)
    intercept = rollout.open_intercept()
    count = TokenCount(rollout, intercept, body)
    messages = anthropic_messages.error_body
    try:
        return await count.answer(request)
    except RolltapError as err:
        count.record_error(err)
        return error_response(err, messages)
    except asyncio.CancelledError:
        error = intercept.claim_cancellation()
        if error is None:
            # aiohttp cancels the handler when the harness disconnects.
            count.record_error(HarnessDisconnectedError("harness disconnected"))
            raise
        count.record_error(error)
        return error_response(error, messages)
    finally:
        rollout.discard(intercept)
        for observer in context.observers:
            observer.call_finished(rollout)
