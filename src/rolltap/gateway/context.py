"""What one gateway's servers and their handlers share.

The :class:`~rolltap.gateway.gateway.Gateway` builds one and hands it to each server;
handlers reach it as ``request.app[CONTEXT]``. It holds what a call needs and nothing
that would lead back up to the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rolltap.config import GatewaySettings
from rolltap.gateway.call_events import DeferredRequests
from rolltap.gateway.observer import CallTracer, RolloutObserver
from rolltap.gateway.stats import GatewayStats
from rolltap.http.auth import AuthThrottle

__all__ = ["GatewayContext"]


@dataclass(slots=True)
class GatewayContext:
    settings: GatewaySettings
    stats: GatewayStats
    #: failed authentications (admin token, rollout secrets) counted per peer
    auth_throttle: AuthThrottle
    #: told of every rollout and every finished call
    observers: list[RolloutObserver] = field(default_factory=list)
    #: also handed each ended call (spans), when given
    tracer: CallTracer | None = None
    #: the calls' request events waiting for their requests to leave
    deferred: DeferredRequests = field(default_factory=DeferredRequests)
