"""The viewer's aiohttp application and the server that owns it.

>>> async def main(store: Store) -> None:  # doctest: +SKIP
...     async with ViewServer(store, ViewConfig(port=0)) as server:
...         print(server.url)
"""

from __future__ import annotations

from importlib.resources import files
from types import TracebackType
from typing import Any

import aiohttp
import jinja2
from aiohttp import web
from aiohttp.typedefs import Middleware

from rolltap.errors import ConfigError, NotFoundError, RolltapError
from rolltap.store import Store
from rolltap.view import pages, render, rollout, service
from rolltap.view.auth import token_middleware
from rolltap.view.base import Handler, page
from rolltap.view.config import ViewConfig
from rolltap.view.keys import CONFIG, HTTP, JINJA, STORE

__all__ = ["ViewServer", "build_app"]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rolltap.view", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(render.FILTERS)
    env.globals.update(render.GLOBALS)
    return env


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Rolltap errors as a page (or JSON under /api/) with their status; never a trace."""
    try:
        return await handler(request)
    except web.HTTPNotFound as exc:
        error: RolltapError = NotFoundError(f"no page {request.path}")
        if exc.text and "Not Found" not in exc.text:
            error = NotFoundError(exc.text)
    except RolltapError as exc:
        error = exc
    if request.path.startswith("/api/"):
        return web.json_response({"error": error.to_dict()}, status=error.status)
    return page(request, "error.html", {"error": error}, status=error.status)


def build_app(store: Store, config: ViewConfig, token: str | None) -> web.Application:
    """The viewer over ``store`` (read only); ``token``: required of every request."""
    middlewares: list[Middleware] = [_errors]
    if token:
        middlewares.append(token_middleware(token))
    app = web.Application(middlewares=middlewares)
    app[STORE], app[CONFIG], app[JINJA] = store, config, _environment()
    app.cleanup_ctx.append(_http_client)
    _routes(app.router)
    app.router.add_static("/static/", str(files("rolltap.view").joinpath("static")))
    return app


def _routes(router: web.UrlDispatcher) -> None:
    """Every page of the viewer (GET only: it never writes)."""
    router.add_get("/", pages.runs_view)
    router.add_get("/api/runs", pages.runs_json)
    router.add_get("/runs/{run}", pages.run_view)
    router.add_get("/sessions/{session}", rollout.rollout_view)
    router.add_get("/sessions/{session}/export.jsonl", rollout.export_view)
    router.add_get("/service", service.service_view)


async def _http_client(app: web.Application) -> Any:
    """The client the Service page asks ``--serve`` with, closed with the app."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as client:
        app[HTTP] = client
        yield


class ViewServer:
    """``rolltap view``'s HTTP server over an open store; an async context manager."""

    def __init__(self, store: Store, config: ViewConfig, token: str | None = None) -> None:
        self.config, self.token = config, token
        self._runner = web.AppRunner(build_app(store, config, token), access_log=None)
        self._port: int | None = None
        self._closed = False

    async def __aenter__(self) -> ViewServer:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        try:
            await site.start()
        except OSError as exc:
            await self.aclose()
            raise _bind_error(self.config, exc) from exc
        self._port = self._runner.addresses[0][1]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening and close the app. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._runner.cleanup()

    @property
    def url(self) -> str:
        """Where a browser opens the viewer (the token is not in it)."""
        host = self.config.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self._port}/"


def _bind_error(config: ViewConfig, exc: OSError) -> RolltapError:
    reason = exc.strerror or type(exc).__name__
    return ConfigError(f"cannot listen on {config.host}:{config.port}: {reason}")
