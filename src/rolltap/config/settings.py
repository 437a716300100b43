"""Gateway settings, read from ``ROLLTAP_*`` environment variables or a TOML table."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rolltap.config.problems import config_error
from rolltap.errors import ConfigError

__all__ = ["GatewaySettings"]

_ENV_PREFIX = "ROLLTAP_"


class GatewaySettings(BaseModel):
    """How a gateway listens and what it bounds.

    Each field can be set by ``ROLLTAP_<FIELD>`` (e.g. ``ROLLTAP_MULTIPLEX=64``); the
    admin token comes from ``ROLLTAP_ADMIN_TOKEN`` and is otherwise generated.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    multiplex: int = Field(default=32, gt=0)
    admin_token: str | None = Field(default=None, repr=False)
    max_body_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    max_model_clients: int = Field(default=64, gt=0)
    idle_grace_s: float = Field(default=30.0, ge=0)
    public_host: str | None = None
    #: a stream whose upstream is silent this long gets the harness dialect's keepalive
    keepalive_s: float = Field(default=15.0, gt=0)
    #: False keeps each delivered call's raw request body on its rollout until the rollout
    #: ends — the retention that seed 004 measured; only for memory benchmarks
    discard_intercepts: bool = True
    #: return freed allocator pages to the OS (``malloc_trim``, off the event loop) this
    #: often, seconds; 0: never
    trim_interval_s: float = Field(default=10.0, ge=0)
    #: a request body not received in full this long after its headers gets
    #: ``408 request_timeout`` (a client trickling bytes cannot hold a handler forever)
    body_timeout_s: float = Field(default=30.0, gt=0)
    #: failed authentications a minute from one peer before ``429 auth_rate_limited``
    auth_failures_per_minute: int = Field(default=10, gt=0)
    #: per rollout, the answers kept for SDK retries (answers that arrived but could not be
    #: delivered, and those of calls with an ``Idempotency-Key``), bytes; 0: none kept
    replay_max_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    #: ``rolltap gateway --store`` leases its run for this long, renewed every 10 s
    lease_ttl_s: float = Field(default=120.0, gt=0)
    #: while an endpoint is paused (``POST /pause``), a new call waits this long at most,
    #: then gets ``503 paused`` with ``Retry-After``
    pause_max_s: float = Field(default=600.0, gt=0)
    #: a rollout whose first call was made this many policy versions before the current
    #: one gets ``409 policy_stale`` and ends ``stale``; None: no bound
    max_staleness: int | None = Field(default=None, gt=0)
    #: the rollouts a trainer uses per policy version (its batch): with ``max_staleness``,
    #: a new rollout waits (at most ``pause_max_s``) while it would be trained on
    #: ``max_staleness`` or more versions after it began (:mod:`rolltap.gateway.ahead`)
    rollouts_per_version: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _ahead_needs_staleness(self) -> GatewaySettings:
        if self.rollouts_per_version is not None and self.max_staleness is None:
            raise ValueError("rollouts_per_version needs max_staleness (the versions it counts)")
        return self

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> GatewaySettings:
        """Settings from ``ROLLTAP_*`` variables; keyword ``overrides`` that are not None win."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = env.get(_ENV_PREFIX + name.upper())
            if raw is not None and raw != "":
                values[name] = raw
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        return cls._build(values, source="flags and environment" if given else "environment")

    @classmethod
    def from_toml(cls, path: str | Path, table: str = "gateway") -> GatewaySettings:
        """Settings from the ``[gateway]`` table of a TOML file."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        section = data.get(table, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: [{table}] must be a table")
        return cls._build(section, source=str(path))

    @classmethod
    def _build(cls, values: Mapping[str, Any], *, source: str) -> GatewaySettings:
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise config_error(source, exc) from exc
