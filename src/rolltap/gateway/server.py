"""One HTTP listener of the gateway, carrying at most ``multiplex`` rollouts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from rolltap.dialects.registry import Dialect, get_dialect
from rolltap.errors import (
    AuthenticationError,
    BodyTooLargeError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    RequestTimeoutError,
    RolloutNotFoundError,
    RolltapError,
)
from rolltap.gateway.authguard import AuthThrottle, tokens_match
from rolltap.gateway.call import error_response
from rolltap.gateway.rollout import Rollout

if TYPE_CHECKING:
    from rolltap.gateway.gateway import Gateway

__all__ = [
    "GATEWAY",
    "SERVER",
    "GatewayServer",
    "bearer_token",
    "check_bearer",
    "peer_of",
    "read_body",
]

GATEWAY: web.AppKey[Gateway] = web.AppKey("gateway")
SERVER: web.AppKey[GatewayServer] = web.AppKey("server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves the gateway in the route's dialect, with rolltap's code."""
    try:
        return await handler(request)
    except RolltapError as err:
        return error_response(err, _dialect_of(request.path))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(_translate_http(exc), _dialect_of(request.path))


def _dialect_of(path: str) -> Dialect:
    # Anthropic routes answer in Anthropic's error shape; every other route (chat,
    # Responses, admin) in OpenAI's.
    return get_dialect("messages" if "/v1/messages" in path else "chat")


def _translate_http(exc: web.HTTPException) -> RolltapError:
    if exc.status == 404:
        return NotFoundError("no such route")
    if exc.status == 405:
        return MethodNotAllowedError(f"method not allowed: {exc.reason}")
    if exc.status == 413:
        return BodyTooLargeError("request body is over the limit")
    return RolltapError(f"HTTP {exc.status}: {exc.reason}")


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def bearer_token(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization")
    if auth is not None and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key")


def peer_of(request: web.Request) -> str:
    """The peer's address (the key failed authentications are counted under)."""
    return request.remote or "?"


def check_bearer(
    request: web.Request, expected: str, throttle: AuthThrottle, *, what: str, key: str = ""
) -> None:
    """Raise unless the request bears ``expected``: ``401`` on a wrong or missing token,
    ``429 auth_rate_limited`` once the peer failed too often (``key`` narrows the count)."""
    counted = peer_of(request) + key
    throttle.check(counted)
    presented = bearer_token(request)
    if presented is None or not tokens_match(presented, expected):
        throttle.failed(counted)
        raise AuthenticationError(f"invalid {what}")


async def read_body(request: web.Request, limit: int, *, timeout_s: float) -> bytes:
    """The request body, at most ``limit`` bytes (else 413), received within
    ``timeout_s`` of being asked for (else ``408 request_timeout``)."""
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLargeError(f"request body of {length} bytes is over the {limit}-byte limit")
    # Read the stream ourselves: Request.read() keeps the bytes on the request for as
    # long as the handler runs — MBs per call for a long multimodal history.
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await request.content.readany():
                body += chunk
                if len(body) > limit:
                    raise BodyTooLargeError(f"request body is over the {limit}-byte limit")
    except TimeoutError:
        raise RequestTimeoutError(
            f"request body not received within {timeout_s:g}s ({len(body)} bytes came)"
        ) from None
    except web.RequestPayloadError as exc:
        # a body aiohttp could not decode (a bad Content-Encoding, broken chunking)
        raise InvalidRequestError(f"unreadable request body: {exc}") from exc
    return bytes(body)


class GatewayServer:
    """An aiohttp listener; the gateway places rollouts on it and closes it when idle."""

    def __init__(self, gateway: Gateway, *, admin: bool, max_body_bytes: int) -> None:
        self.admin = admin
        self.rollouts: dict[str, Rollout] = {}
        self.idle_since: float | None = time.monotonic()
        self.url = ""
        app = web.Application(middlewares=[_errors], client_max_size=max_body_bytes)
        app[GATEWAY] = gateway
        app[SERVER] = self
        app.router.add_get("/health", _health)
        self.app = app
        # handler_cancellation: a harness that disconnects cancels its handler, and with
        # it the upstream request, at once.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=5.0
        )
        self._started = False
        self._closed = False

    @property
    def load(self) -> int:
        return len(self.rollouts)

    def authenticate(self, request: web.Request) -> Rollout:
        rollout_id = request.match_info["rollout_id"]
        rollout = self.rollouts.get(rollout_id)
        if rollout is None:
            raise RolloutNotFoundError(f"no rollout {rollout_id!r} on this server")
        # counted per peer and rollout: one harness with a stale secret must not lock
        # every other rollout of the same host out
        throttle = self.app[GATEWAY].auth_throttle
        check_bearer(request, rollout.secret, throttle, what="rollout secret", key="/" + rollout_id)
        return rollout

    def place(self, rollout: Rollout) -> None:
        self.rollouts[rollout.id] = rollout
        self.idle_since = None

    def remove(self, rollout_id: str) -> None:
        if self.rollouts.pop(rollout_id, None) is not None and not self.rollouts:
            self.idle_since = time.monotonic()

    async def start(self, host: str, port: int, public_host: str | None) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self._started = True
        bound_port = self._runner.addresses[0][1]
        shown = public_host or ("127.0.0.1" if host in ("0.0.0.0", "") else host)
        if ":" in shown:
            shown = f"[{shown}]"
        self.url = f"http://{shown}:{bound_port}"

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._started:
            await self._runner.cleanup()
