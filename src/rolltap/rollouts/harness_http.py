"""The HTTP client a harness is given (``ctx.http_client``): one ``httpx2.AsyncClient`` per
rollout, all of a run's over one aiohttp session.

The official SDKs take an ``httpx2.AsyncClient``; its default transport (httpcore2 on anyio,
h11's HTTP parser in pure Python) was the largest part of a built-in harness call's CPU
(``benchmarks/cpu_split.py``), and a pool shared by thousands of rollouts is scanned whole
on every request. :class:`SessionTransport` sends the requests of a rollout's client on a
:class:`aiohttp.ClientSession` the runner owns (aiohttp parses in C, and its connector finds
an idle connection without a scan), so every rollout keeps a client of its own — cookies,
headers, auth, ``aclose()`` — while connections are made once and reused across rollouts.

A client's ``aclose()`` closes nothing shared: the session is closed by its owner.
Errors come back as httpx2's (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``…),
so an SDK reports them as it would on its own transport.

>>> async def harness_http_demo() -> None:  # doctest: +SKIP
...     async with harness_session(ssl.create_default_context()) as session:
...         async with rollout_client(session) as http:
...             await http.get("http://127.0.0.1:8000/health")
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import aiohttp
import httpx2

__all__ = ["SessionTransport", "harness_session", "rollout_client"]

#: how long an idle connection is kept for the next request (the gateway's keep-alive is longer)
_KEEPALIVE_S = 30.0


@asynccontextmanager
async def harness_session(ssl_context: ssl.SSLContext) -> AsyncIterator[aiohttp.ClientSession]:
    """One run's connections: no connection limit (the run's ``c`` bounds them), no
    cookies kept (each rollout's httpx2 client keeps its own), no environment proxies
    (httpx2 routes a proxied URL to its own proxy transport)."""
    connector = aiohttp.TCPConnector(
        limit=0, limit_per_host=0, ssl=ssl_context, keepalive_timeout=_KEEPALIVE_S
    )
    async with aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
        auto_decompress=False,
    ) as session:  # fmt: skip
        yield session


def rollout_client(session: aiohttp.ClientSession) -> httpx2.AsyncClient:
    """A rollout's own client (no timeout of its own: an SDK passes one per request)."""
    return httpx2.AsyncClient(transport=SessionTransport(session), timeout=None)


@contextmanager
def _translated(request: httpx2.Request) -> Iterator[None]:
    """aiohttp's errors as httpx2's, the cause kept."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx2.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
    except aiohttp.ServerTimeoutError as exc:
        raise httpx2.ReadTimeout(str(exc) or "read timed out", request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx2.ConnectError(str(exc), request=request) from exc
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
        raise httpx2.RemoteProtocolError(str(exc), request=request) from exc
    except aiohttp.ClientError as exc:
        raise httpx2.NetworkError(str(exc) or type(exc).__name__, request=request) from exc


class _Body(httpx2.AsyncByteStream):
    """A response's body as it arrives; closing it early closes its connection."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response, self._request = response, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translated(self._request):
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()  # read whole: the connection goes back for reuse
        else:
            self._response.close()  # left unread (a harness gave up): never reused


class SessionTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that sends on a shared :class:`aiohttp.ClientSession`."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = request.extensions.get("timeout", {})
        headers = [(k, v) for k, v in request.headers.multi_items() if k != "transfer-encoding"]
        with _translated(request):
            response = await self._session.request(
                request.method, str(request.url), headers=headers,
                data=await request.aread() or None, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )  # fmt: skip
        reason = (response.reason or "").encode()
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": reason}
        return httpx2.Response(
            response.status, headers=response.raw_headers, stream=_Body(response, request),
            request=request, extensions=extensions,
        )  # fmt: skip

    async def aclose(self) -> None:
        """Nothing to close: the session belongs to the run (see :func:`harness_session`)."""
