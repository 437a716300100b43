"""One HTTP listener of the gateway, carrying at most ``multiplex`` rollouts."""

from __future__ import annotations

import time

from aiohttp import web

from rolltap.dialects.registry import get_dialect
from rolltap.errors import RolloutNotFoundError
from rolltap.gateway.context import GatewayContext
from rolltap.gateway.rollout import Rollout
from rolltap.http.auth import check_bearer
from rolltap.http.errors import ErrorShape, error_middleware

__all__ = ["CONTEXT", "SERVER", "GatewayServer"]

CONTEXT: web.AppKey[GatewayContext] = web.AppKey("context")
SERVER: web.AppKey[GatewayServer] = web.AppKey("server")

_MESSAGES, _CHAT = get_dialect("messages").error_body, get_dialect("chat").error_body


def _shape_of(request: web.Request) -> ErrorShape:
    # Anthropic routes answer in Anthropic's error shape; every other route (chat,
    # Responses, admin) in OpenAI's.
    return _MESSAGES if "/v1/messages" in request.path else _CHAT


#: every error leaves the gateway in the route's dialect, with rolltap's code
_errors = error_middleware(_shape_of)


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


class GatewayServer:
    """An aiohttp listener; the gateway places rollouts on it and closes it when idle."""

    def __init__(self, context: GatewayContext, *, max_body_bytes: int) -> None:
        self.rollouts: dict[str, Rollout] = {}
        self.idle_since: float | None = time.monotonic()
        self.url = ""
        app = web.Application(middlewares=[_errors], client_max_size=max_body_bytes)
        app[CONTEXT] = context
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
        """The request's rollout, its secret checked (:meth:`rollout_of`, :meth:`check`)."""
        rollout = self.rollout_of(request)
        self.check(request, rollout)
        return rollout

    def rollout_of(self, request: web.Request) -> Rollout:
        """The rollout the request's path names; 404 ``rollout_not_found`` if not here."""
        rollout_id = request.match_info["rollout_id"]
        rollout = self.rollouts.get(rollout_id)
        if rollout is None:
            raise RolloutNotFoundError(f"no rollout {rollout_id!r} on this server")
        return rollout

    def check(self, request: web.Request, rollout: Rollout) -> None:
        """401 unless the request bears ``rollout``'s secret (throttled per peer)."""
        # counted per peer and rollout: one harness with a stale secret must not lock
        # every other rollout of the same host out
        throttle = self.app[CONTEXT].auth_throttle
        check_bearer(request, rollout.secret, throttle, what="rollout secret", key="/" + rollout.id)

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
