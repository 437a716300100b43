"""One chat-completions call through the gateway: rewrite, record, relay, record.

The request is relayed with two documented rewrites only (see README, "Request
rewrites"): ``model`` becomes the endpoint's model, and streams get
``stream_options.include_usage`` so usage is always recorded. When the gateway added
``include_usage`` itself, the usage-only chunk is recorded but not relayed, so the
harness sees the stream it asked for. Everything else is relayed byte for byte,
stream chunks as they arrive.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from rolltap.clients.relay import UpstreamResponse
from rolltap.dialects.openai_chat import error_body, split_params
from rolltap.dialects.sse import SSEEvent, SSESplitter, encode_data
from rolltap.errors import (
    RolltapError,
    UpstreamProtocolError,
    UpstreamStatusError,
    http_status_of,
)
from rolltap.gateway.recording import ChatStreamAccumulator, summarize_body
from rolltap.gateway.rollout import Intercept, Rollout
from rolltap.gateway.stats import GatewayStats
from rolltap.store.events import EventKind

__all__ = ["ChatCall", "error_response", "relayed_headers"]

CHAT_PATH = "/v1/chat/completions"
_MAX_ERROR_BODY = 4096


#: upstream response headers the gateway sets itself or that only make sense per hop
_DROPPED_RESPONSE_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "content-encoding",
        "content-type",
        "date",
        "server",
        "set-cookie",
        "upgrade",
        "trailer",
        "proxy-authenticate",
    }
)


def relayed_headers(upstream: Mapping[str, str]) -> dict[str, str]:
    """Upstream response headers passed to the harness (request ids, rate limits, …)."""
    return {k: v for k, v in upstream.items() if k.lower() not in _DROPPED_RESPONSE_HEADERS}


def error_response(err: RolltapError) -> web.Response:
    headers = {}
    if err.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(err.retry_after)))
    return web.Response(
        body=error_body(err),
        status=http_status_of(err),
        headers=headers,
        content_type="application/json",
    )


class ChatCall:
    """State of one intercepted chat-completions call."""

    __slots__ = (
        "body",
        "intercept",
        "request",
        "response",
        "rollout",
        "stats",
        "stream",
        "strip_usage",
        "t_first",
        "t_headers",
    )

    def __init__(
        self,
        request: web.Request,
        rollout: Rollout,
        intercept: Intercept,
        body: dict[str, Any],
        stats: GatewayStats,
    ) -> None:
        self.request = request
        self.rollout = rollout
        self.intercept = intercept
        self.body = body
        self.stats = stats
        self.stream = bool(body.get("stream"))
        self.strip_usage = False
        self.response: web.StreamResponse | None = None
        self.t_headers: float | None = None
        self.t_first: float | None = None

    def record_request(self) -> bytes:
        """Apply the rewrites, append the request event, return the bytes to send."""
        body, rewrites = self.body, []
        model = self.rollout.endpoint.model
        if body.get("model") != model:
            rewrites.append({"field": "model", "from": body.get("model"), "to": model})
            body["model"] = model
        for name, value in self.rollout.sampling.items():
            if body.get(name) != value:
                rewrites.append({"field": name, "from": body.get(name), "to": value})
                body[name] = value
        if self.stream:
            opts = body.get("stream_options") or {}
            if not opts.get("include_usage"):
                rewrites.append({"field": "stream_options.include_usage", "from": None, "to": True})
                body["stream_options"] = {**opts, "include_usage": True}
                self.strip_usage = True
        messages = body["messages"]
        match = self.rollout.conversations.match(messages)
        self.rollout.log.append(
            EventKind.MODEL_REQUEST,
            {
                "intercept_id": self.intercept.id,
                "route": "chat.completions",
                "dialect": "chat",
                "stream": self.stream,
                "prefix_digest": match.digest,
                "prefix_messages": match.length,
                "messages": messages[match.length :],
                "params": split_params(body),
                "rewrites": rewrites,
            },
        )
        return orjson.dumps(body)

    async def run(self) -> web.StreamResponse:
        self.rollout.admit_call()
        data = self.record_request()
        limiter = self.rollout.limiter
        if limiter is None:
            return await self._send(data)
        async with limiter.slot():
            return await self._send(data)

    async def _send(self, data: bytes) -> web.StreamResponse:
        client = self.rollout.client
        headers = self.request.headers
        async with client.send(CHAT_PATH, data, headers, rollout_id=self.rollout.id) as up:
            self.t_headers = time.perf_counter()
            if up.status >= 400:
                raise await _status_error(up)
            if self.stream and up.content_type == "text/event-stream":
                return await self._relay_stream(up)
            return await self._relay_body(up)

    async def _relay_body(self, up: UpstreamResponse) -> web.Response:
        raw = await up.read()
        self.t_first = time.perf_counter()
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamProtocolError(f"upstream returned invalid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise UpstreamProtocolError("upstream returned a JSON value that is not an object")
        self._record_response(up.status, parsed, chunks=None)
        return web.Response(
            body=raw,
            status=up.status,
            headers=relayed_headers(up.headers),
            content_type="application/json",
        )

    async def _relay_stream(self, up: UpstreamResponse) -> web.StreamResponse:
        headers = relayed_headers(up.headers)
        headers["Content-Type"] = "text/event-stream"
        headers["Cache-Control"] = "no-cache"
        resp = web.StreamResponse(status=up.status, headers=headers)
        await resp.prepare(self.request)
        self.response = resp
        splitter, acc = SSESplitter(), ChatStreamAccumulator()
        done = False
        async for chunk in up.iter_chunks():
            if self.t_first is None:
                self.t_first = time.perf_counter()
            out, finished = self._fold(splitter.feed(chunk), acc)
            done = done or finished
            if out:
                await resp.write(out)
        if not done:
            raise UpstreamProtocolError("upstream stream ended before [DONE]")
        self._record_response(up.status, acc.body(), chunks=acc.chunks)
        await resp.write_eof()
        return resp

    def _fold(self, events: list[SSEEvent], acc: ChatStreamAccumulator) -> tuple[bytes, bool]:
        """Record complete events; return the bytes to relay now and whether [DONE] came."""
        done = False
        keep: list[bytes] = []
        for ev in events:
            if ev.data is None:
                keep.append(ev.raw)
                continue
            if ev.data == b"[DONE]":
                done = True
                keep.append(ev.raw)
                continue
            try:
                obj = orjson.loads(ev.data)
            except orjson.JSONDecodeError as exc:
                raise UpstreamProtocolError(
                    f"upstream sent a malformed stream event: {exc}"
                ) from exc
            if not isinstance(obj, dict):
                raise UpstreamProtocolError("upstream sent a stream event that is not an object")
            if "error" in obj:
                raise UpstreamProtocolError(f"upstream stream error: {obj['error']}")
            acc.add(obj)
            if self.strip_usage and not obj.get("choices") and obj.get("usage"):
                continue
            keep.append(ev.raw)
        return b"".join(keep), done

    def _timing(self) -> dict[str, float | None]:
        t0 = self.intercept.started
        now = time.perf_counter()
        return {
            "ttfb_ms": _ms(t0, self.t_headers),
            "ttfc_ms": _ms(t0, self.t_first),
            "total_ms": _ms(t0, now),
        }

    def _record_response(self, status: int, body: dict[str, Any], chunks: int | None) -> None:
        payload: dict[str, Any] = {
            "intercept_id": self.intercept.id,
            "status": status,
            "stream": self.stream,
            "body": body,
            **summarize_body(body),
            "timing": self._timing(),
        }
        if chunks is not None:
            payload["chunks"] = chunks
        self.rollout.log.append(EventKind.MODEL_RESPONSE, payload)
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
        self.stats.record_error(err.code)

    async def fail(self, err: RolltapError) -> web.StreamResponse:
        """Record ``err`` and deliver it: a response, or an in-band event mid-stream."""
        self.record_error(err)
        resp = self.response
        if resp is None:
            return error_response(err)
        await resp.write(encode_data(error_body(err)))
        await resp.write_eof()
        return resp


async def _status_error(up: UpstreamResponse) -> UpstreamStatusError:
    body = await up.read()
    detail = _upstream_error(body)
    message = f"upstream answered HTTP {up.status}"
    if detail is not None and isinstance(detail.get("message"), str):
        message += ": " + detail["message"]
    err = UpstreamStatusError(
        message,
        upstream_status=up.status,
        body=body,
        retry_after=_retry_after(up.headers.get("Retry-After")),
    )
    err.upstream_error = detail
    return err


def _upstream_error(raw: bytes) -> dict[str, Any] | None:
    """The upstream's own ``error`` object, when its body is an error in OpenAI shape."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    detail = parsed.get("error") if isinstance(parsed, dict) else None
    return detail if isinstance(detail, dict) else None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _ms(t0: float, t: float | None) -> float | None:
    return None if t is None else round((t - t0) * 1000.0, 3)
