"""The run-config flags of ``rolltap eval``, ``gateway`` and ``serve``, read in this
process: the command is stopped where it would start running, and what it built from its
flags is kept (:func:`eval_configs`, :func:`served`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rolltap.cli import eval_cmd, gateway_cmd, serve_cmd
from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts import RunConfig


def eval_configs(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """Stop ``rolltap eval`` once it has its run config (a ``ConfigError``: exit 2); the
    configs of the invocations from here on, in order."""
    seen: list[RunConfig] = []

    async def fake_eval(config: RunConfig, *args: object) -> Any:
        seen.append(config)
        raise ConfigError("stop here")

    monkeypatch.setattr(eval_cmd, "_eval", fake_eval)
    return seen


@dataclass(frozen=True, slots=True)
class Served:
    """What ``rolltap gateway`` or ``serve`` was about to serve."""

    #: the endpoint its flags made; None: the built-in local model's
    endpoint: EndpointConfig | None
    #: the endpoint fields given to the local model
    local_fields: dict[str, str] | None


def served(monkeypatch: pytest.MonkeyPatch) -> list[Served]:
    """Stop ``rolltap gateway`` and ``rolltap serve`` where they would start serving
    (exit 0); what the invocations from here on were about to serve, in order."""
    seen: list[Served] = []

    async def fake_gateway(
        endpoint: EndpointConfig | None, *args: object, local_fields: dict[str, str] | None = None
    ) -> int:
        seen.append(Served(endpoint, local_fields))
        return 0

    async def fake_serve(
        values: dict[str, Any], config_file: Path | None, *,
        local_fields: dict[str, str] | None = None,
    ) -> int:  # fmt: skip
        endpoints = values.get("endpoints") or [None]  # the flags make one endpoint at most
        seen.append(Served(endpoints[0], local_fields))
        return 0

    monkeypatch.setattr(gateway_cmd, "_serve", fake_gateway)
    monkeypatch.setattr(serve_cmd, "_serve", fake_serve)
    return seen
