"""rolltap: run many concurrent LLM agent rollouts through a tapping, multiplexing gateway.

>>> import rolltap
>>> rolltap.EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="m").dialect
'chat'
"""

from rolltap.clients import ModelClient, RelayClient, join_url
from rolltap.config import EndpointConfig, GatewaySettings, Timeouts
from rolltap.errors import (
    AuthenticationError,
    ConfigError,
    GatewayClosedError,
    InvalidRequestError,
    LimitReachedError,
    ModelPoolClosedError,
    ModelPoolFullError,
    PoolCloseError,
    PoolError,
    RolloutClosedError,
    RolloutNotFoundError,
    RolltapError,
    StoreBusyError,
    StoreError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from rolltap.gateway import Gateway, Rollout
from rolltap.local import LocalModel
from rolltap.pool import Lease, ModelClientPool, PoolSnapshot
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Event, EventKind, EventLog

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "EndpointConfig",
    "Event",
    "EventKind",
    "EventLog",
    "Gateway",
    "GatewayClosedError",
    "GatewaySettings",
    "InvalidRequestError",
    "Lease",
    "LimitReachedError",
    "LocalModel",
    "ModelClient",
    "ModelClientPool",
    "ModelPoolClosedError",
    "ModelPoolFullError",
    "PoolCloseError",
    "PoolError",
    "PoolSnapshot",
    "RelayClient",
    "Rollout",
    "RolloutClosedError",
    "RolloutNotFoundError",
    "RolltapError",
    "SimConfig",
    "Simulator",
    "StoreBusyError",
    "StoreError",
    "Timeouts",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "__version__",
    "join_url",
]
