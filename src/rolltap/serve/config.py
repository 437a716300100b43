"""How ``rolltap serve`` runs: workers, bounds, cadences, store, endpoints.

From Python, flags, or a TOML file whose ``[serve]`` table holds these fields and whose
``[endpoints.NAME]`` tables the endpoints::

    [serve]
    workers = 4
    store = "postgresql://db/rolltap"

    [serve.gateway]           # each worker's gateway (GatewaySettings)
    max_staleness = 2         # --max-staleness; pause_max_s = 600: --pause-max-s

    [endpoints.policy]
    base_url = "http://127.0.0.1:8000/v1"
    model = "my-policy"
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.config.net import is_loopback
from rolltap.config.problems import config_error
from rolltap.errors import ConfigError
from rolltap.rollouts.config import check_ray_fields
from rolltap.rollouts.harness_loader import builtin_harness_names
from rolltap.store import DEFAULT_LEASE_TTL_S, DEFAULT_UNAVAILABLE_TIMEOUT_S
from rolltap.tokens.parsers import resolve_parser

__all__ = ["TOKEN_ENV", "ServeConfig", "is_loopback"]

#: the environment variable holding the service's bearer token
TOKEN_ENV = "ROLLTAP_SERVE_TOKEN"
_BODY_TIMEOUT_ENV = "ROLLTAP_BODY_TIMEOUT_S"


def _default_body_timeout() -> float:
    raw = os.environ.get(_BODY_TIMEOUT_ENV) or "30"
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{_BODY_TIMEOUT_ENV}: not a number: {raw!r}") from None


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


class ServeConfig(BaseModel):
    """One rollout service. Durations are seconds.

    ``max_inflight`` bounds the rollouts each worker runs at once; with every worker
    full a submission gets the retryable ``429 service_full``. A worker whose stats
    frame is ``heartbeat_timeout_s`` late is killed and replaced. ``max_rollout_s`` caps
    every rollout's wall clock (a submission's ``limits.timeout_s`` may only lower it).
    ``trim`` returns freed memory to the OS on the stats cadence; ``discard_intercepts``
    off keeps every delivered call's body until its rollout ends (benchmarks only).
    ``test_hooks`` lets submissions block a worker's loop (tests only).

    ``allow_harness`` lists the ``module:function`` harnesses and rewards and the
    ``cmd`` command lines callers may name (built-ins always run). It is enforced when
    it is not empty, and always when ``host`` is not loopback: there an empty list
    allows only the built-ins. ``body_timeout_s`` (``ROLLTAP_BODY_TIMEOUT_S``) bounds
    how long a submission's body may take to arrive; ``auth_failures_per_minute`` wrong
    tokens from one peer get it ``429 auth_rate_limited``.

    While the store is unreachable the service holds its rollouts' writes, refuses new
    batches with ``503 store_unavailable`` and goes on running what is in flight; past
    ``store_unavailable_timeout_s`` what could not be saved goes to
    ``rolltap-unsaved-<run>-w<worker>.jsonl`` in ``unsaved_dir`` (default: the current
    directory), which ``rolltap sessions import`` loads. For 30 s after a write finds
    the store full, new batches get ``507 store_full``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: int = Field(default_factory=_default_workers, gt=0)
    #: None: the workers are processes on this machine. Else they are Ray actors (the
    #: ``ray`` extra): ``local`` starts a cluster for the service, ``auto`` joins the
    #: running one, or a cluster address; ``workers`` in all, or ``workers_per_node`` on
    #: every node (placed with a SPREAD placement group within ``start_timeout_s``)
    ray: str | None = Field(default=None, min_length=1)
    workers_per_node: int | None = Field(default=None, gt=0)
    #: with ``ray``: a directory uploaded to every node as the workers' working directory
    #: (their ``module:function`` harnesses import from it)
    ray_working_dir: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    token: str | None = Field(default=None, repr=False)
    store: str | None = Field(default=None, repr=False)
    endpoints: list[EndpointConfig] = Field(min_length=1)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    max_inflight: int = Field(default=64, gt=0)
    stats_interval_s: float = Field(default=10.0, gt=0)
    heartbeat_timeout_s: float = Field(default=30.0, gt=0)
    start_timeout_s: float = Field(default=60.0, gt=0)
    drain_timeout_s: float = Field(default=60.0, ge=0)
    max_rollout_s: float = Field(default=3600.0, gt=0)
    max_batch: int = Field(default=4096, gt=0)
    #: each batch's run is leased by this supervisor (renewed every 10 s); past this a
    #: SIGKILLed supervisor's open rollouts read ``interrupted`` (callers resubmit them)
    lease_ttl_s: float = Field(default=DEFAULT_LEASE_TTL_S, gt=0)
    trim: bool = True
    discard_intercepts: bool = True
    test_hooks: bool = False
    #: OpenTelemetry spans from every worker (the ``otel`` extra): True/False force them
    #: on/off; None: on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. ``otel_content``
    #: adds prompts and completions.
    otel: bool | None = None
    otel_content: bool = False

    allow_harness: list[str] = Field(default_factory=list)
    body_timeout_s: float = Field(default_factory=_default_body_timeout, gt=0)
    auth_failures_per_minute: int = Field(default=10, gt=0)
    store_unavailable_timeout_s: float = Field(default=DEFAULT_UNAVAILABLE_TIMEOUT_S, gt=0)
    unsaved_dir: str | None = None
    #: the built-in harnesses every worker imports before it says ready (each brings
    #: its SDK, a second or more of CPU); None: every one. Another is imported when a
    #: rollout first names it, on its worker's loop
    preload_harnesses: list[str] | None = None

    @model_validator(mode="after")
    def _check_placement(self) -> ServeConfig:
        check_ray_fields(self.ray, self.workers_per_node, self.ray_working_dir)
        return self

    @model_validator(mode="after")
    def _check_preloads(self) -> ServeConfig:
        builtins = builtin_harness_names()
        unknown = sorted(set(self.preload_harnesses or ()) - builtins)
        if unknown:
            raise ValueError(
                f"preload_harnesses: {', '.join(map(repr, unknown))} not built in"
                f" (the built-ins: {', '.join(sorted(builtins))})"
            )
        return self

    @model_validator(mode="after")
    def _check_parsers(self) -> ServeConfig:
        # an unknown parser name fails here, not in every worker's start
        for endpoint in self.endpoints:
            if endpoint.client == "tokens":
                resolve_parser(endpoint.tool_parser, endpoint.reasoning_parser)
        return self

    @property
    def restricts_code(self) -> bool:
        """Whether only built-ins and ``allow_harness`` entries may run."""
        return bool(self.allow_harness) or not is_loopback(self.host)

    def endpoint_names(self) -> set[str]:
        return {ep.name for ep in self.endpoints}

    def resolved_token(self) -> str | None:
        """The configured token, else ``ROLLTAP_SERVE_TOKEN``, else None (generate one)."""
        return self.token or os.environ.get(TOKEN_ENV) or None

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> ServeConfig:
        """Read ``[serve]`` and ``[endpoints.NAME]``; ``overrides`` that are not None win."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        serve = dict(data.get("serve") or {})
        endpoints = data.get("endpoints") or {}
        if not isinstance(endpoints, dict):
            raise ConfigError(f"{path}: [endpoints] must hold tables")
        if endpoints:
            serve["endpoints"] = [{"name": name, **spec} for name, spec in endpoints.items()]
        given = {k: v for k, v in overrides.items() if v is not None}
        if isinstance(given.get("gateway"), dict) and isinstance(serve.get("gateway"), dict):
            # flags over the file's [serve.gateway] table, field by field
            given["gateway"] = {**serve["gateway"], **given["gateway"]}
        serve.update(given)
        return cls.build(serve, source=str(path))

    @classmethod
    def build(cls, values: dict[str, Any], *, source: str = "serve config") -> ServeConfig:
        """Validate ``values``; ConfigError naming the first bad field."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise config_error(source, exc) from exc
