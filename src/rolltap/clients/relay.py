"""The relay client: forwards a harness request to the upstream as-is (eval mode).

One :class:`RelayClient` per endpoint identity, owned by the gateway's pool and shared
by every rollout on it; its aiohttp session keeps warm keepalive connections, bounded
by the endpoint's ``max_connections``. It never retries: failures surface to the
harness and the trace. Library errors are translated here, at the boundary.

Responses are only available inside a context manager, so a connection can never be
leaked by a caller that stops reading::

    async with client.send("/v1/chat/completions", body, headers) as upstream:
        async for chunk in upstream.iter_chunks():
            ...
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from aiohttp.payload import Payload
from multidict import CIMultiDict

from rolltap.clients.base import join_url
from rolltap.config import EndpointConfig
from rolltap.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeoutError,
)

__all__ = [
    "DROPPED_REQUEST_HEADERS", "ROLLOUT_HEADER", "ROUTING_HEADERS", "RelayClient",
    "UpstreamResponse", "relayed_headers",
]  # fmt: skip

#: hop-by-hop headers, framing headers aiohttp sets itself, and the harness's own auth;
#: ``expect`` and ``content-encoding`` described the harness's body, which the gateway
#: has already read (and decoded): sent on, an upstream would wait for a body that was
#: sent, or fail to decode a plain one
DROPPED_REQUEST_HEADERS = frozenset(
    {
        "expect",
        "content-encoding",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "authorization",
        "x-api-key",
        "cookie",
    }
)

ROLLOUT_HEADER = "X-Rolltap-Rollout"
#: the rollout id again, under the names routers in front of replicas pin on
#: (vllm-router's consistent hash, SGLang's router)
ROUTING_HEADERS = ("X-Session-ID", "X-SMG-Routing-Key")
_ROLLOUT_NAMES = (ROLLOUT_HEADER, *ROUTING_HEADERS)

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


@dataclass(slots=True)
class UpstreamResponse:
    """The upstream's answer: status and headers at once, the body read on demand."""

    status: int
    headers: Mapping[str, str]
    _response: aiohttp.ClientResponse

    @property
    def content_type(self) -> str:
        return self._response.content_type

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise translate_error(exc) from exc

    async def read_chunk(self, silence_s: float | None = None) -> bytes | None:
        """The next body bytes as they arrive, ``b""`` at the end, or ``None`` when the
        upstream has been silent for ``silence_s`` (nothing is lost: call again)."""
        scope = asyncio.timeout(silence_s)
        try:
            async with scope:
                return await self._response.content.readany()
        except (aiohttp.ClientError, TimeoutError) as exc:
            if scope.expired():
                return None
            raise translate_error(exc) from exc

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """Yield body bytes as they arrive (no re-chunking, no buffering)."""
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise translate_error(exc) from exc


#: what a client following redirects would resend the body on (a 301/302/303 it would
#: resend as a GET, without one)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _redirected(status: int, location: str | None) -> UpstreamError:
    """An endpoint that redirects its calls is a misconfigured ``base_url``: followed, each
    call would cost a round trip more, and the body sent is not kept to send again
    (:class:`~rolltap.clients.sent_body.SentOnce`)."""
    where = f" to {location}" if location else ""
    return UpstreamProtocolError(
        f"upstream answered {status}, a redirect{where}, which rolltap does not follow: "
        "set the endpoint's base_url to where it points"
    )


def translate_error(exc: BaseException) -> UpstreamError:
    """Map an aiohttp/asyncio error to rolltap's upstream error tree."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeoutError(f"upstream timed out ({type(exc).__name__})")
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientSSLError):
        return UpstreamConnectionError(f"cannot connect to upstream: {exc.os_error}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return UpstreamProtocolError(f"upstream connection broke: {type(exc).__name__}")
    return UpstreamProtocolError(f"upstream request failed: {type(exc).__name__}: {exc}")


class RelayClient:
    """Forwards requests to one upstream endpoint with one credential."""

    kind = "relay"

    def __init__(self, endpoint: EndpointConfig, credential: str | None) -> None:
        """The connect timeout bounds only the connection's establishment: aiohttp's
        ``connect`` also covers waiting for a free pooled connection, which would fail
        calls queued behind ``max_connections`` busy ones as ``upstream_timeout`` (and
        make a busy replica look down); a queued call waits, bounded by ``total`` and by
        its rollout's timeout."""
        self.endpoint = endpoint
        t = endpoint.timeouts
        self._timeout = aiohttp.ClientTimeout(
            total=t.total, sock_connect=t.connect, sock_read=t.read
        )
        # the headers every request gets (the later of two spellings of a name wins):
        # built once, as a client's endpoint and credential never change
        fixed: CIMultiDict[str] = CIMultiDict()
        for extra in (endpoint.headers, _auth_headers(endpoint, credential)):
            fixed.update(extra)
        fixed["Content-Type"] = "application/json"
        for name in _ROLLOUT_NAMES:
            fixed.popall(name, None)
        self._fixed = list(fixed.items())
        self._replaced = (
            DROPPED_REQUEST_HEADERS
            | {k.lower() for k in fixed}
            | {n.lower() for n in _ROLLOUT_NAMES}
        )
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._urls: dict[str, str] = {}  # path -> URL: join_url costs a regex per call

    def _client_session(self) -> aiohttp.ClientSession:
        # Built lazily: aiohttp sessions must be created inside a running event loop.
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.endpoint.max_connections,
                limit_per_host=0,
                ssl=ssl.create_default_context(),
                enable_cleanup_closed=False,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                auto_decompress=False,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    def upstream_headers(
        self, harness_headers: Mapping[str, str], rollout_id: str
    ) -> CIMultiDict[str]:
        """The harness's headers, less the dropped ones and those the gateway sets: the
        endpoint's own, its credential, the content type, then the rollout's id under
        each name routers pin on (the last word on each)."""
        headers: CIMultiDict[str] = CIMultiDict(
            [(k, v) for k, v in harness_headers.items() if k.lower() not in self._replaced]
        )
        headers.extend(self._fixed)
        for name in _ROLLOUT_NAMES:
            headers.add(name, rollout_id)
        return headers

    @asynccontextmanager
    async def send(
        self,
        path: str,
        body: bytes | Payload,
        harness_headers: Mapping[str, str],
        *,
        rollout_id: str,
        from_root: bool = False,
    ) -> AsyncIterator[UpstreamResponse]:
        """POST ``body`` to the endpoint's ``path``; the response lives inside the block.
        A redirect is answered ``upstream_bad_response``, not followed.

        ``from_root``: ``path`` is from the server's root, not from ``base_url`` (llama.cpp's
        own ``/completion`` beside its OpenAI-compatible ``/v1``).
        """
        if self._closed:
            raise UpstreamConnectionError("model client is closed")
        key = ("/" if from_root else "") + path
        url = self._urls.get(key)
        if url is None:
            base = self.endpoint.base_url
            if from_root:
                parts = urlsplit(base)
                base = f"{parts.scheme}://{parts.netloc}"
            url = self._urls[key] = join_url(base, path)
        headers = self.upstream_headers(harness_headers, rollout_id)
        try:
            response = await self._client_session().post(
                url, data=body, headers=headers, allow_redirects=False
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise translate_error(exc) from exc
        if response.status in _REDIRECTS:
            response.close()
            raise _redirected(response.status, response.headers.get("Location"))
        try:
            yield UpstreamResponse(response.status, response.headers, response)
        finally:
            # release() returns a fully read connection to the pool; close() drops a
            # half-read one so its slot is freed at once (cancellation, errors).
            if response.content.at_eof():
                response.release()
            else:
                response.close()

    async def aclose(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _auth_headers(endpoint: EndpointConfig, credential: str | None) -> dict[str, str]:
    if credential is None:
        return {}
    if endpoint.dialect == "messages":
        return {"x-api-key": credential, "anthropic-version": "2023-06-01"}
    return {"Authorization": f"Bearer {credential}"}
