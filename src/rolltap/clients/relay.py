"""The relay client: forwards a harness request to the upstream as-is (eval mode).

One :class:`RelayClient` per endpoint identity, owned by the gateway's pool and shared
by every rollout on it; its :class:`~rolltap.clients.wire_pool.WirePool` keeps warm
keepalive connections, bounded by the endpoint's ``max_connections``. It never retries:
failures surface to the harness and the trace, as rolltap's errors
(:mod:`rolltap.clients.wire`; :mod:`rolltap.clients.exchange`, where a request and its
response live).

Responses are only available inside a context manager, so a connection can never be
leaked by a caller that stops reading::

    async with client.send("/v1/chat/completions", body, headers) as upstream:
        async for chunk in upstream.iter_chunks():
            ...
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from multidict import CIMultiDict

from rolltap.clients.base import join_url
from rolltap.clients.exchange import Exchange, UpstreamResponse
from rolltap.clients.sent_body import SentOnce
from rolltap.clients.wire_pool import Origin, WirePool
from rolltap.config import EndpointConfig
from rolltap.errors import UpstreamConnectionError, UpstreamProtocolError

__all__ = [
    "DROPPED_REQUEST_HEADERS", "ROLLOUT_HEADER", "ROUTING_HEADERS", "RelayClient",
    "UpstreamResponse", "relayed_headers",
]  # fmt: skip

#: hop-by-hop headers, framing headers the client sets itself, and the harness's own auth;
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


class RelayClient:
    """Forwards requests to one upstream endpoint with one credential."""

    kind = "relay"

    def __init__(self, endpoint: EndpointConfig, credential: str | None) -> None:
        """The connect timeout bounds only the connection's establishment, not the wait
        for a free pooled connection: calls queued behind ``max_connections`` busy ones
        wait, bounded by ``total`` and by their rollout's timeout (failed as
        ``upstream_timeout``, they would make a busy replica look down)."""
        self.endpoint = endpoint
        base = urlsplit(endpoint.base_url)
        # the headers every request gets (the later of two spellings of a name wins):
        # built once, as a client's endpoint and credential never change
        fixed: CIMultiDict[str] = CIMultiDict()
        for extra in (_url_auth(base.username, base.password), endpoint.headers,
                      _auth_headers(endpoint, credential)):  # fmt: skip
            fixed.update(extra)
        fixed["Content-Type"] = "application/json"
        for name in _ROLLOUT_NAMES:
            fixed.popall(name, None)
        #: the endpoint's header lines, every request's
        self._fixed_lines = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._fixed_items = tuple(fixed.items())
        self._replaced = (
            DROPPED_REQUEST_HEADERS
            | {k.lower() for k in fixed}
            | {n.lower() for n in _ROLLOUT_NAMES}
        )
        self._pool = WirePool(
            Origin(endpoint.base_url), limit=endpoint.max_connections,
            connect_s=endpoint.timeouts.connect,
        )  # fmt: skip
        self._closed = False
        self._starts: dict[str, str] = {}  # path -> request line and Host: built once

    def upstream_headers(self, harness_headers: Mapping[str, str], rollout_id: str) -> str:
        """The header lines sent: the harness's headers, less the dropped ones and those
        the gateway sets, then the endpoint's own, its credential, the content type, then
        the rollout's id under each name routers pin on (the last word on each).

        A header holding a line break would end the head early and smuggle in one of its
        own: refused, naming the header but not its value (a credential)."""
        replaced = self._replaced
        lines = [f"{k}: {v}\r\n" for k, v in harness_headers.items() if k.lower() not in replaced]
        lines.append(self._fixed_lines)
        lines.extend(f"{name}: {rollout_id}\r\n" for name in _ROLLOUT_NAMES)
        text = "".join(lines)
        count = text.count("\n")
        if count != len(self._fixed_items) + len(lines) - 1 or text.count("\r") != count:
            sent = (*harness_headers.items(), *self._fixed_items, ("rollout id", rollout_id))
            bad = [k for k, v in sent if "\r" in k + v or "\n" in k + v]
            raise UpstreamProtocolError(f"the header {bad[0]!r} to send holds a line break")
        return text

    def send(
        self,
        path: str,
        body: bytes | SentOnce,
        harness_headers: Mapping[str, str],
        *,
        rollout_id: str,
        from_root: bool = False,
    ) -> Exchange:
        """POST ``body`` to the endpoint's ``path``, as a block the response lives in (an
        :class:`~rolltap.clients.exchange.Exchange`). A redirect is answered
        ``upstream_bad_response``, not followed.

        ``from_root``: ``path`` is from the server's root, not from ``base_url`` (llama.cpp's
        own ``/completion`` beside its OpenAI-compatible ``/v1``).
        """
        if self._closed:
            raise UpstreamConnectionError("model client is closed")
        key = ("/" if from_root else "") + path
        start = self._starts.get(key)
        if start is None:
            start = self._starts[key] = self._start(path, from_root=from_root)
        head = (start + self.upstream_headers(harness_headers, rollout_id)).encode(
            "utf-8", "surrogateescape"
        )
        return Exchange(self._pool, head, body, self.endpoint.timeouts)

    def _start(self, path: str, *, from_root: bool) -> str:
        base = self.endpoint.base_url
        if from_root:
            parts = urlsplit(base)
            base = f"{parts.scheme}://{parts.netloc}"
        url = urlsplit(join_url(base, path))
        target = url.path or "/"
        if url.query:
            target += "?" + url.query
        return f"POST {target} HTTP/1.1\r\nHost: {self._pool.origin.host_header}\r\n"

    async def aclose(self) -> None:
        self._closed = True
        await self._pool.aclose()


def _url_auth(user: str | None, password: str | None) -> dict[str, str]:
    """``https://user:pass@host``: sent as basic auth (a credential, if any, wins)."""
    if user is None:
        return {}
    pair = f"{unquote(user)}:{unquote(password or '')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


def _auth_headers(endpoint: EndpointConfig, credential: str | None) -> dict[str, str]:
    if credential is None:
        return {}
    if endpoint.dialect == "messages":
        return {"x-api-key": credential, "anthropic-version": "2023-06-01"}
    return {"Authorization": f"Bearer {credential}"}
