"""One model call through the gateway, in any harness dialect to any upstream dialect.

When the harness and the upstream speak the same dialect the request is relayed with
the documented rewrites only (:mod:`rolltap.gateway.rewrite`) and the answer byte for
byte, stream chunks as they arrive. When they differ, the request is translated
through the canonical model (:mod:`rolltap.dialects`), and so is the answer: a body at
once, a stream event by event (:class:`~rolltap.gateway.streaming.StreamRelay`).

Either way the request event keeps what the harness sent and the response event what
the upstream answered, each with its dialect, plus a chat-shaped ``usage``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from aiohttp import web

from rolltap.clients.relay import UpstreamResponse
from rolltap.dialects.registry import Dialect, get_dialect
from rolltap.dialects.streams import StreamRenderer, stream_renderer
from rolltap.errors import (
    RolltapError,
    UpstreamProtocolError,
    UpstreamStatusError,
    http_status_of,
)
from rolltap.gateway.folding import events_of, summarize_canonical
from rolltap.gateway.recording import summarize_body
from rolltap.gateway.replay import NOT_A_RETRY, Answer, Lookup, Outcome, replayed_fields
from rolltap.gateway.rewrite import CONVERSATION_KEYS, apply_rewrites, conversation_of
from rolltap.gateway.rollout import Intercept, Rollout
from rolltap.gateway.stats import GatewayStats
from rolltap.gateway.streaming import StreamRelay
from rolltap.store.events import EventKind

__all__ = ["ModelCall", "error_response", "relayed_headers"]

_MAX_ERROR_BODY = 4096

#: upstream response headers never relayed: hop-by-hop and framing headers, those the
#: gateway sets itself, and those about the upstream's own origin (cookies, its transport
#: and security policy)
_DROPPED_RESPONSE_HEADERS = frozenset(
    {
        "connection", "keep-alive", "transfer-encoding", "content-length",
        "content-encoding", "content-type", "date", "server", "set-cookie", "upgrade",
        "trailer", "proxy-authenticate", "alt-svc", "strict-transport-security",
    }
)  # fmt: skip
#: CORS answers a browser about the upstream's origin; the harness talks to the gateway,
#: whose policy it is not (llama-server sends ``Access-Control-Allow-Origin`` on every answer)
_DROPPED_RESPONSE_PREFIX = "access-control-"


def relayed_headers(upstream: Mapping[str, str]) -> dict[str, str]:
    """Upstream response headers passed to the harness (request ids, rate limits, …).

    Every header but those in :data:`_DROPPED_RESPONSE_HEADERS`, CORS (``Access-Control-*``)
    and empty ones, which carry nothing and which some clients reject.
    """
    out: dict[str, str] = {}
    for name, value in upstream.items():
        lower = name.lower()
        if not value.strip() or lower in _DROPPED_RESPONSE_HEADERS:
            continue
        if lower.startswith(_DROPPED_RESPONSE_PREFIX):
            continue
        out[name] = value
    return out


def error_response(err: RolltapError, dialect: Dialect | None = None) -> web.Response:
    """``err`` as an HTTP response in ``dialect``'s error shape (chat's by default)."""
    headers = {}
    if err.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(err.retry_after)))
    return web.Response(
        body=(dialect or get_dialect("chat")).error_body(err),
        status=http_status_of(err),
        headers=headers,
        content_type="application/json",
    )


class ModelCall:
    """State of one intercepted model call."""

    __slots__ = (
        "answered", "body", "frames", "harness", "harness_usage", "intercept", "keepalive_s",
        "lookup", "outcome", "request", "response", "rollout", "stats", "stream", "t_first",
        "t_headers", "upstream",
    )  # fmt: skip

    def __init__(
        self, request: web.Request, rollout: Rollout, intercept: Intercept, harness: Dialect,
        body: dict[str, Any], stats: GatewayStats, *, keepalive_s: float,
        lookup: Lookup = NOT_A_RETRY,
    ) -> None:  # fmt: skip
        self.request, self.rollout, self.intercept = request, rollout, intercept
        #: whether this call is an SDK retry, of which call, with an answer to replay
        self.lookup, self.outcome = lookup, Outcome(intercept.id)
        #: the ``model_response`` payload, once the upstream's answer is recorded
        self.answered: dict[str, Any] | None = None
        self.harness, self.upstream = harness, get_dialect(rollout.endpoint.dialect)
        self.body, self.stats, self.keepalive_s = body, stats, keepalive_s
        self.stream = bool(body.get("stream"))
        # read before the rewrites, which may add include_usage to a chat body
        opts = body.get("stream_options")
        self.harness_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        # the harness dialect's frames (content when translating, keepalives, in-band
        # errors) and the response, once a stream to the harness is open
        self.frames: StreamRenderer | None = None
        self.response: web.StreamResponse | None = None
        self.t_headers: float | None = None
        self.t_first: float | None = None

    @property
    def translating(self) -> bool:
        return self.harness.name != self.upstream.name

    def upstream_body(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The body to send upstream, and the rewrites made to it."""
        if self.translating:
            body = self.upstream.from_canonical(self.harness.to_canonical(self.body))
        else:
            body = self.body
        endpoint = self.rollout.endpoint
        return body, apply_rewrites(self.upstream.name, body, endpoint.model, self.rollout.sampling)

    def record_request(self) -> bytes:
        """Append the request event; the bytes to send upstream."""
        body, rewrites = self.upstream_body()
        self.log_request(rewrites)
        return orjson.dumps(body)

    def log_request(self, rewrites: list[dict[str, Any]], **extra: Any) -> None:
        """The request event: what the harness sent, past the prefix already recorded."""
        conversation = conversation_of(self.harness.name, self.body)
        match = self.rollout.conversations.match(conversation)
        key = CONVERSATION_KEYS[self.harness.name]
        self.rollout.log.append(
            EventKind.MODEL_REQUEST,
            {
                "intercept_id": self.intercept.id,
                "route": self.harness.path.removeprefix("/v1/").replace("/", "."),
                "dialect": self.harness.name,
                "upstream_dialect": self.upstream_name,
                "stream": self.stream,
                "prefix_digest": match.digest,
                "prefix_messages": match.length,
                "messages": conversation[match.length :],
                "params": {k: v for k, v in self.body.items() if k != key},
                "rewrites": rewrites,
                **self._retry_fields(),
                **extra,
            },
        )

    def _retry_fields(self) -> dict[str, Any]:
        lookup, out = self.lookup, dict[str, Any]()
        if lookup.retry_count:
            out["retry_count"] = lookup.retry_count
        if lookup.retry_of is not None:
            out["retry_of"] = lookup.retry_of
        return out

    @property
    def upstream_name(self) -> str:
        return self.upstream.name

    async def run(self) -> web.StreamResponse:
        if self.lookup.replay is not None:
            return await self._replay(self.lookup.replay)
        self.rollout.admit_call()
        data = self.record_request()
        limiter = self.rollout.limiter
        if limiter is None:
            return await self._send(data)
        async with limiter.slot():
            return await self._send(data)

    async def _send(self, data: bytes) -> web.StreamResponse:
        client, path = self.rollout.client, self.upstream.path
        async with client.send(path, data, self.request.headers, rollout_id=self.rollout.id) as up:
            self.t_headers = time.perf_counter()
            if up.status >= 400:
                raise await self._status_error(up)
            if self.stream and up.content_type == "text/event-stream":
                return await self._relay_stream(up)
            return await self._relay_body(up)

    async def _relay_body(self, up: UpstreamResponse) -> web.StreamResponse:
        raw = await up.read()
        self.t_first = time.perf_counter()
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamProtocolError(f"upstream returned invalid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise UpstreamProtocolError("upstream returned a JSON value that is not an object")
        if self.translating:
            canonical = self.upstream.response_to_canonical(parsed)
            summary = summarize_canonical(canonical)
            raw = orjson.dumps(self.harness.response_from_canonical(canonical))
        elif self.upstream.name == "chat":
            summary = summarize_body(parsed)
        else:
            summary = summarize_canonical(self.upstream.response_to_canonical(parsed))
        self._record_response(up.status, {"body": parsed, **summary})
        return await self.deliver_body(raw, up.status, relayed_headers(up.headers))

    async def deliver_body(
        self, body: bytes, status: int, headers: Mapping[str, str]
    ) -> web.StreamResponse:
        """Write a whole JSON answer here, not after the handler returns, so that a harness
        gone by then is noticed (its answer is kept for the SDK's retry)."""
        resp = web.Response(
            body=body, status=status, headers=headers, content_type="application/json"
        )
        await resp.prepare(self.request)
        await resp.write_eof()
        self.outcome.delivered = True
        return resp

    async def deliver_events(self, status: int, headers: dict[str, str], answer: Any) -> None:
        """Render a complete canonical answer as the harness's event stream and end it."""
        if self.response is None or self.frames is None:
            await self.open_stream(status, headers)
        frames, response = self.frames, self.response
        assert frames is not None
        assert response is not None
        await response.write(b"".join(frames.render(e) for e in events_of(answer)))
        await response.write_eof()
        self.outcome.delivered = True

    async def _replay(self, answer: Answer) -> web.StreamResponse:
        """Answer an SDK retry from the answer its original call could not deliver: the
        upstream is not called again, and the event carries no second token record."""
        self.log_request([])
        self.t_headers = self.t_first = time.perf_counter()
        self.rollout.log.append(
            EventKind.MODEL_RESPONSE,
            {
                "intercept_id": self.intercept.id, "status": answer.status,
                "stream": self.stream, "dialect": self.upstream_name, **answer.recorded,
                "replay_of": self.lookup.retry_of, "retry_count": self.lookup.retry_count,
                "timing": self._timing(),
            },
        )  # fmt: skip
        self.stats.replays += 1
        headers = {"x-rolltap-replay-of": str(self.lookup.retry_of)}
        if self.stream:
            await self.deliver_events(answer.status, headers, answer.response)
            assert self.response is not None
            return self.response
        body = orjson.dumps(self.harness.response_from_canonical(answer.response))
        return await self.deliver_body(body, answer.status, headers)

    def answer_for_replay(self) -> Answer:
        """The recorded answer, for a retry to get (called only when one may need it)."""
        assert self.answered is not None
        body = self.answered.get("body")
        response = self.canonical_answer()
        return Answer(
            int(self.answered["status"]),
            response,
            replayed_fields(self.answered),
            len(orjson.dumps(body)),
        )

    def canonical_answer(self) -> Any:
        assert self.answered is not None
        return self.upstream.response_to_canonical(self.answered["body"])

    async def _relay_stream(self, up: UpstreamResponse) -> web.StreamResponse:
        headers = relayed_headers(up.headers)
        resp, frames = await self.open_stream(up.status, headers)
        relay = StreamRelay(self.harness, self.upstream, frames, harness_usage=self.harness_usage)
        async for chunk in self.chunks(up):
            if self.t_first is None:
                self.t_first = time.perf_counter()
            if out := relay.feed(chunk):
                await resp.write(out)
        if out := relay.finish():
            await resp.write(out)
        self._record_response(up.status, relay.recorded(self.upstream))
        await resp.write_eof()
        self.outcome.delivered = True
        return resp

    async def open_stream(
        self, status: int, headers: dict[str, str]
    ) -> tuple[web.StreamResponse, StreamRenderer]:
        """Start the harness's event stream; its response and its dialect's renderer."""
        self.frames = stream_renderer(
            self.harness.name, model=self.rollout.endpoint.model,
            include_usage=self.harness_usage,
        )  # fmt: skip
        headers = {**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = self.response = web.StreamResponse(status=status, headers=headers)
        await resp.prepare(self.request)
        return resp, self.frames

    async def chunks(self, up: UpstreamResponse) -> AsyncIterator[bytes]:
        """The upstream's body as it arrives; each ``keepalive_s`` of silence sends an
        open harness stream its dialect's keepalive."""
        while True:
            chunk = await up.read_chunk(self.keepalive_s)
            if chunk is None:
                if self.response is not None and self.frames is not None:
                    await self.response.write(self.frames.keepalive())
                continue
            if not chunk:
                return
            yield chunk

    async def _status_error(self, up: UpstreamResponse) -> UpstreamStatusError:
        body = await up.read()
        detail = self.upstream.upstream_error_detail(body)
        message = f"upstream answered HTTP {up.status}"
        if detail is not None and isinstance(detail.get("message"), str):
            message += ": " + detail["message"]
        err = UpstreamStatusError(
            message, upstream_status=up.status, body=body,
            retry_after=_retry_after(up.headers.get("Retry-After")),
        )  # fmt: skip
        err.upstream_error = detail
        return err

    def _timing(self) -> dict[str, float | None]:
        t0 = self.intercept.started
        return {
            "ttfb_ms": _ms(t0, self.t_headers),
            "ttfc_ms": _ms(t0, self.t_first),
            "total_ms": _ms(t0, time.perf_counter()),
        }

    def _record_response(self, status: int, recorded: dict[str, Any]) -> None:
        payload: dict[str, Any] = {
            "intercept_id": self.intercept.id,
            "status": status,
            "stream": self.stream,
            "dialect": self.upstream_name,
            **recorded,
            "timing": self._timing(),
        }
        self.rollout.log.append(EventKind.MODEL_RESPONSE, payload)
        self.answered, self.outcome.answered = payload, True
        self.stats.record_response(payload["usage"])
        self.rollout.add_usage(payload["usage"])

    def record_error(self, err: RolltapError) -> None:
        payload: dict[str, Any] = {
            "intercept_id": self.intercept.id,
            **err.to_dict(),
            "stream": self.stream,
            "timing": self._timing(),
        }
        if isinstance(err, UpstreamStatusError):
            payload["upstream_body"] = err.body[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        self.rollout.log.append(EventKind.MODEL_ERROR, payload)
        self.outcome.error_status = http_status_of(err)
        self.stats.record_error(err.code)

    async def fail(self, err: RolltapError) -> web.StreamResponse:
        """Record ``err`` and deliver it: a response, or an in-band event mid-stream."""
        self.record_error(err)
        resp, frames = self.response, self.frames
        if resp is None or frames is None:
            self.outcome.delivered = True  # handed to aiohttp
            return error_response(err, self.harness)
        await resp.write(frames.error(err))
        await resp.write_eof()
        return resp


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _ms(t0: float, t: float | None) -> float | None:
    return None if t is None else round((t - t0) * 1000.0, 3)
