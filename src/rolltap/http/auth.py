"""Checking bearer credentials: in constant time, and throttled per peer.

Every credential rolltap checks (the gateway's admin token, each rollout's secret, the
serve token) is read by :func:`bearer_token` and compared by :func:`tokens_match`;
:func:`check_bearer` does both, throttled. :class:`AuthThrottle` answers
``429 auth_rate_limited`` once a peer has failed ``limit`` times within a minute, to
every attempt of that key — the right token too, or a guesser would learn it from the
different answer — until the oldest failure leaves the window.

>>> throttle = AuthThrottle(limit=2)
>>> throttle.failed("10.0.0.1"); throttle.failed("10.0.0.1")
>>> try:
...     throttle.check("10.0.0.1")
... except AuthRateLimitedError as err:
...     err.code
'auth_rate_limited'
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from aiohttp import web

from rolltap.errors import AuthenticationError, AuthRateLimitedError

__all__ = ["AuthThrottle", "bearer_token", "check_bearer", "peer_of", "tokens_match"]

#: the most peers whose recent failures are remembered; the least recently failing
#: one is forgotten first, so memory stays bounded whatever the number of peers
MAX_PEERS = 4096
WINDOW_S = 60.0


def tokens_match(presented: str, expected: str) -> bool:
    """Whether ``presented`` equals ``expected``, in time independent of where they differ.

    Header values may hold undecodable bytes (aiohttp keeps them as surrogate escapes);
    they are encoded back rather than raising.
    """
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


class AuthThrottle:
    """Failed authentications per key (a peer address, or a peer and a rollout)."""

    def __init__(
        self,
        limit: int = 10,
        *,
        window_s: float = WINDOW_S,
        max_peers: int = MAX_PEERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit, self.window_s, self.max_peers = limit, window_s, max_peers
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._failures)

    def _recent(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    def check(self, key: str) -> None:
        """Raise ``AuthRateLimitedError`` while ``key`` is over its failures a window."""
        now = self._clock()
        times = self._recent(key, now)
        if times is not None and len(times) >= self.limit:
            retry = times[0] + self.window_s - now
            raise AuthRateLimitedError(
                f"too many failed authentications; retry in {retry:.0f}s", retry_after=retry
            )

    def failed(self, key: str) -> None:
        """Record one failed authentication of ``key``."""
        now = self._clock()
        times = self._recent(key, now)
        if times is None:
            # at most ``limit`` timestamps a key: older ones cannot matter any more
            times = self._failures[key] = deque(maxlen=self.limit)
        times.append(now)
        self._failures.move_to_end(key)
        while len(self._failures) > self.max_peers:
            self._failures.popitem(last=False)


def bearer_token(request: web.Request) -> str | None:
    """The presented credential: ``Authorization: Bearer …``, else ``x-api-key``."""
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
    if len(throttle):  # failures on record (none, the usual case: nothing to look up)
        throttle.check(peer_of(request) + key)
    presented = bearer_token(request)
    if presented is None or not tokens_match(presented, expected):
        throttle.failed(peer_of(request) + key)
        raise AuthenticationError(f"invalid {what}")
