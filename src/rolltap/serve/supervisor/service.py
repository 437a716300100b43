"""The rollout service: the supervisor behind its HTTP API, and how it stops.

>>> async def main(config: ServeConfig) -> None:  # doctest: +SKIP
...     async with Service(config) as service:
...         print(service.url)          # give service.token to the callers
...         await service.run_until_signalled()

SIGTERM (or SIGINT) drains: nothing new is admitted, rollouts in flight get
``drain_timeout_s`` to finish, the rest are cancelled, their callers get every
result, the store is flushed and ``rolltap serve`` exits 0 (1 when the deadline had
to cancel rollouts or a store write failed). A second signal cancels at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal

from aiohttp import web

from rolltap.errors import ConfigError
from rolltap.serve.config import ServeConfig
from rolltap.serve.supervisor.http_api import KEEPALIVE_S, build_app
from rolltap.serve.supervisor.supervisor import Supervisor
from rolltap.store import WriterHooks

__all__ = ["Service"]

log = logging.getLogger("rolltap.serve")

#: how long open result streams get to write their last lines after a drain
_HTTP_SHUTDOWN_S = 10.0


class Service:
    """``rolltap serve`` as an async context manager."""

    def __init__(
        self,
        config: ServeConfig,
        *,
        keepalive_s: float = KEEPALIVE_S,
        store_hooks: WriterHooks | None = None,
    ) -> None:
        """``store_hooks`` is for tests only (see :class:`Supervisor`)."""
        self.config = config
        configured = config.resolved_token()
        self.token = configured or secrets.token_urlsafe(24)
        self.token_generated = configured is None
        self.keepalive_s = keepalive_s
        self.supervisor = Supervisor(config, store_hooks=store_hooks)
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._signals = 0
        self._stopped = asyncio.Event()
        self._closed = False

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start the workers, then listen (so a ready answer means ready workers)."""
        try:
            await self.supervisor.start()
            runner = web.AppRunner(
                build_app(self), access_log=None, handler_cancellation=True,
                shutdown_timeout=_HTTP_SHUTDOWN_S,
            )  # fmt: skip
            self._runner = runner
            await runner.setup()
            site = web.TCPSite(runner, self.config.host, self.config.port)
            try:
                await site.start()
            except OSError as exc:
                raise ConfigError(
                    f"cannot listen on {self.config.host}:{self.config.port}: {exc}"
                ) from exc
        except BaseException:
            await self.aclose()
            raise
        host, port = runner.addresses[0][:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        self.url = f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"

    async def drain(self, grace_s: float | None = None) -> bool:
        """Stop admitting, let rollouts finish for ``grace_s`` (default ``drain_timeout_s``),
        then cancel the rest; False when some had to be cancelled at the deadline."""
        return await self.supervisor.drain(grace_s)

    async def aclose(self) -> None:
        """Drain at once (cancel what runs), finish the streams, stop workers, flush. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.supervisor.drain(0.0)
            if self._runner is not None:
                await self._runner.cleanup()
        finally:
            await self.supervisor.aclose()

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals == 1:
            log.warning("draining: no new rollouts; waiting up to %gs", self.config.drain_timeout_s)
            self._stopped.set()
        else:
            log.warning("cancelling every rollout in flight")
            self.supervisor.cancel_all()

    async def run_until_signalled(self) -> bool:
        """Serve until SIGTERM/SIGINT, then drain (a second signal cancels at once);
        whether the drain finished before its deadline (see :meth:`drain`)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal)
        try:
            await self._stopped.wait()
            return await self.drain()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
