"""rolltap: run many concurrent LLM agent rollouts through a tapping, multiplexing gateway.

The public names below are resolved on first use (a module ``__getattr__``), so
``import rolltap.dialects.canonical`` — or any part on its own — loads that part and
what it imports, not the gateway, the store and their libraries.

>>> import rolltap
>>> rolltap.EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="m").dialect
'chat'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rolltap.clients import RelayClient, join_url
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
    from rolltap.events import Event, EventKind, EventLog
    from rolltap.gateway import Gateway, Rollout
    from rolltap.local import LocalModel
    from rolltap.pool import Lease, ModelClientPool, PoolSnapshot
    from rolltap.pool.client import ModelClient
    from rolltap.sim import SimConfig, Simulator

__version__ = "0.1.0"

_ERRORS = (
    "AuthenticationError", "ConfigError", "GatewayClosedError", "InvalidRequestError",
    "LimitReachedError", "ModelPoolClosedError", "ModelPoolFullError", "PoolCloseError",
    "PoolError", "RolloutClosedError", "RolloutNotFoundError", "RolltapError",
    "StoreBusyError", "StoreError", "UpstreamError", "UpstreamProtocolError",
    "UpstreamStatusError", "UpstreamTimeoutError",
)  # fmt: skip
#: each public name → the module it comes from
_HOMES = {
    "RelayClient": "rolltap.clients",
    "join_url": "rolltap.clients",
    "EndpointConfig": "rolltap.config",
    "GatewaySettings": "rolltap.config",
    "Timeouts": "rolltap.config",
    **dict.fromkeys(_ERRORS, "rolltap.errors"),
    "Gateway": "rolltap.gateway",
    "Rollout": "rolltap.gateway",
    "LocalModel": "rolltap.local",
    "Lease": "rolltap.pool",
    "ModelClientPool": "rolltap.pool",
    "PoolSnapshot": "rolltap.pool",
    "ModelClient": "rolltap.pool.client",
    "SimConfig": "rolltap.sim",
    "Simulator": "rolltap.sim",
    "Event": "rolltap.events",
    "EventKind": "rolltap.events",
    "EventLog": "rolltap.events",
}

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


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use; later uses find it in globals()."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rolltap' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
