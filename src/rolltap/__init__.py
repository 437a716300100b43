r"""rolltap: run many concurrent LLM agent rollouts through a tapping, multiplexing gateway.

The public names, by what a user does with them:

* run an eval — :func:`evaluate`, :func:`resume`, :func:`retry_failed`, :class:`RunConfig`,
  :func:`score` (a stored run scored again, no model call: :class:`Scored`), :func:`eval_set`
  and :func:`resume_eval_set` (several runs under one id: :class:`SetResult`),
  on a backend (:class:`InProcess`, :class:`Workers`, :class:`Ray`); :class:`Task`, a harness
  (:data:`Harness`, given a :class:`HarnessContext`, returning a :class:`HarnessResult`),
  :class:`RunResult` of :class:`RolloutResult`\ s, :class:`Hooks` for a front end
* the gateway in front of your own agent — :class:`Gateway`, :class:`Rollout`,
  :class:`EndpointConfig`, :class:`GatewaySettings`, :class:`Timeouts`; beneath it the
  model-client pool (:class:`ModelClientPool`, :class:`Lease`, :class:`PoolSnapshot`,
  :class:`ModelClient`) and :class:`RelayClient` / :func:`join_url`
* results and storage — :class:`Store` (SQLite, PostgreSQL, MySQL) and the event model
  (:class:`Event`, :class:`EventKind`, :class:`EventLog`)
* the rollout service — :class:`ServeClient` (``rolltap serve``'s caller)
* a model without a server — :class:`LocalModel` (llama.cpp), :class:`Simulator`
  (:class:`SimConfig`)
* errors — :class:`RolltapError` and its tree (:mod:`rolltap.errors`)

They are resolved on first use (a module ``__getattr__``), so ``import rolltap`` — or
``import rolltap.dialects.canonical``, any part on its own — loads that part and what it
imports, not the gateway, the store and their libraries.

>>> import rolltap
>>> rolltap.EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="m").dialect
'chat'
>>> async def main() -> None:  # doctest: +SKIP
...     config = rolltap.RunConfig(tasks="examples/patterns.jsonl", r=2, rewards=["prefix"])
...     result = await rolltap.evaluate(config, backend=rolltap.Workers(2))
...     print(result.summary["reward"]["mean"])
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
    from rolltap.evalset import SetResult, eval_set, resume_eval_set
    from rolltap.evaluation import evaluate, resume, retry_failed
    from rolltap.events import Event, EventKind, EventLog
    from rolltap.gateway import Gateway, Rollout
    from rolltap.local import LocalModel
    from rolltap.pool import Lease, ModelClientPool, PoolSnapshot
    from rolltap.pool.client import ModelClient
    from rolltap.rollouts import (
        Harness,
        HarnessContext,
        HarnessResult,
        Hooks,
        InProcess,
        RolloutResult,
        RunConfig,
        RunResult,
        Task,
    )
    from rolltap.rollouts.scoring import Scored, score
    from rolltap.serve import Ray, ServeClient, Workers
    from rolltap.sim import SimConfig, Simulator
    from rolltap.store import Store
    from rolltap.version import __version__

#: run an eval
_EVAL = {
    "evaluate": "rolltap.evaluation", "resume": "rolltap.evaluation",
    "retry_failed": "rolltap.evaluation",
    "score": "rolltap.rollouts.scoring", "Scored": "rolltap.rollouts.scoring",
    "eval_set": "rolltap.evalset", "resume_eval_set": "rolltap.evalset",
    "SetResult": "rolltap.evalset",
    **dict.fromkeys(("Harness", "HarnessContext", "HarnessResult", "Hooks", "InProcess",
                     "RolloutResult", "RunConfig", "RunResult", "Task"), "rolltap.rollouts"),
    "Workers": "rolltap.serve", "Ray": "rolltap.serve",
}  # fmt: skip
#: the gateway in front of your own agent, and what is beneath it
_GATEWAY = {
    "Gateway": "rolltap.gateway", "Rollout": "rolltap.gateway",
    "EndpointConfig": "rolltap.config", "GatewaySettings": "rolltap.config",
    "Timeouts": "rolltap.config",
    "ModelClientPool": "rolltap.pool", "Lease": "rolltap.pool", "PoolSnapshot": "rolltap.pool",
    "ModelClient": "rolltap.pool.client",
    "RelayClient": "rolltap.clients", "join_url": "rolltap.clients",
}  # fmt: skip
#: results and storage
_STORAGE = {
    "Store": "rolltap.store",
    **dict.fromkeys(("Event", "EventKind", "EventLog"), "rolltap.events"),
}
#: the rollout service, and a model without a server
_SERVICE_AND_MODELS = {
    "ServeClient": "rolltap.serve",
    "LocalModel": "rolltap.local", "SimConfig": "rolltap.sim", "Simulator": "rolltap.sim",
}  # fmt: skip
_ERRORS = (
    "AuthenticationError", "ConfigError", "GatewayClosedError", "InvalidRequestError",
    "LimitReachedError", "ModelPoolClosedError", "ModelPoolFullError", "PoolCloseError",
    "PoolError", "RolloutClosedError", "RolloutNotFoundError", "RolltapError",
    "StoreBusyError", "StoreError", "UpstreamError", "UpstreamProtocolError",
    "UpstreamStatusError", "UpstreamTimeoutError",
)  # fmt: skip
#: each public name → the module it comes from
_HOMES = {
    **_EVAL, **_GATEWAY, **_STORAGE, **_SERVICE_AND_MODELS,
    **dict.fromkeys(_ERRORS, "rolltap.errors"),
    "__version__": "rolltap.version",
}  # fmt: skip

#: grouped by a user's jobs in the module docstring
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
    "Harness",
    "HarnessContext",
    "HarnessResult",
    "Hooks",
    "InProcess",
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
    "Ray",
    "RelayClient",
    "Rollout",
    "RolloutClosedError",
    "RolloutNotFoundError",
    "RolloutResult",
    "RolltapError",
    "RunConfig",
    "RunResult",
    "Scored",
    "ServeClient",
    "SetResult",
    "SimConfig",
    "Simulator",
    "Store",
    "StoreBusyError",
    "StoreError",
    "Task",
    "Timeouts",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "Workers",
    "__version__",
    "eval_set",
    "evaluate",
    "join_url",
    "resume",
    "resume_eval_set",
    "retry_failed",
    "score",
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
