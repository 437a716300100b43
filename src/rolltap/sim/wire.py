"""HTTP-level helpers: OpenAI error responses, writing a response, resetting a connection,
the digest of a request's credential."""

from __future__ import annotations

import hashlib
import socket
import struct

import orjson
from aiohttp import web

__all__ = ["AuthDigests", "error_headers", "error_response", "reset_connection", "send"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


# Digests kept: a credential is hashed once, not per request.
_DIGEST_CACHE_LIMIT = 1024


class AuthDigests:
    """``x-sim-auth-digest``: 16 hex chars of the SHA-256 of a request's ``Authorization``,
    else of its ``x-api-key``, else ``none`` (the credential itself is never kept)."""

    def __init__(self) -> None:
        self._digests: dict[str | None, str] = {}

    def of(self, request: web.BaseRequest) -> str:
        """The digest of ``request``'s credential."""
        value = request.headers.get("Authorization")
        if value is None:
            value = request.headers.get("x-api-key")
        digest = self._digests.get(value)
        if digest is None:
            digest = "none" if value is None else hashlib.sha256(value.encode()).hexdigest()[:16]
            if len(self._digests) >= _DIGEST_CACHE_LIMIT:
                self._digests.clear()
            self._digests[value] = digest
        return digest


def error_headers(status: int, headers: dict[str, str]) -> dict[str, str]:
    """``headers`` for an error response: 429 and 503 also carry ``Retry-After: 1``."""
    out = dict(headers)
    if status in (429, 503):
        out["Retry-After"] = "1"
    return out


def error_response(status: int, message: str, code: str, headers: dict[str, str]) -> web.Response:
    """An OpenAI-shaped error: ``{"error": {"message", "type", "code"}}``."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = orjson.dumps({"error": {"message": message, "type": kind, "code": code}})
    out = error_headers(status, headers)
    return web.Response(status=status, body=body, content_type="application/json", headers=out)


async def send(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """Write ``response`` in full now (not after the handler returns), so a write
    failure surfaces in the handler and "completed" means fully sent."""
    await response.prepare(request)
    await response.write_eof()


def reset_connection(request: web.BaseRequest) -> None:
    """Abort the request's connection with a TCP RST, sending nothing."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
