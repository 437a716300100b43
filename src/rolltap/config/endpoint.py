"""Endpoint configuration and its identity digest.

An :class:`EndpointConfig` names an upstream model endpoint. It holds the *name* of the
environment variable with the API key, never the key itself, so configs can be logged,
stored and compared freely. The resolved credential only enters the SHA-256 identity.

>>> cfg = EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="gemma")
>>> len(cfg.identity(credential=None))
64
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rolltap.errors import ConfigError

__all__ = ["ClientKind", "Dialect", "EndpointConfig", "Timeouts"]

Dialect = Literal["chat", "messages", "responses"]
ClientKind = Literal["relay", "tokens"]


class Timeouts(BaseModel):
    """Upstream timeouts in seconds. ``read`` bounds the silence between two chunks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect: float = Field(default=10.0, gt=0)
    read: float = Field(default=600.0, gt=0)
    total: float | None = Field(default=None, gt=0)


class EndpointConfig(BaseModel):
    """One upstream model endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "default"
    dialect: Dialect = "chat"
    base_url: str
    model: str
    api_key_env: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    max_connections: int = Field(default=256, gt=0)
    #: cap on calls in flight to this endpoint (None: only max_connections bounds them)
    max_inflight: int | None = Field(default=None, gt=0)
    #: how long a call may wait for an in-flight slot, and how many may wait
    inflight_timeout_s: float = Field(default=60.0, gt=0)
    max_queued: int = Field(default=4096, gt=0)
    #: ``relay`` forwards harness requests (eval); ``tokens`` renders them to token ids
    #: with ``tokenizer`` and calls the upstream's completions API (training)
    client: ClientKind = "relay"
    tokenizer: str | None = None
    #: the token client's upstream API: vLLM/SGLang ``/v1/completions`` or llama.cpp's
    completions_api: Literal["vllm", "llamacpp"] = "vllm"
    #: how completions are parsed into text, reasoning and tool calls (rolltap.tokens.parsers)
    tool_parser: str = "hermes"
    template_kwargs: dict[str, Any] = Field(default_factory=dict)
    #: tokens besides the tokenizer's EOS that end a turn (e.g. Gemma's ``<end_of_turn>``)
    eos_tokens: tuple[str, ...] = ()

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_client(self) -> EndpointConfig:
        if self.client == "tokens" and not self.tokenizer:
            raise ValueError("client 'tokens' needs a tokenizer (a local tokenizer directory)")
        return self

    def resolve_credential(self, environ: Mapping[str, str] | None = None) -> str | None:
        """Read the API key from the named environment variable (``None`` when none is named)."""
        if self.api_key_env is None:
            return None
        env = os.environ if environ is None else environ
        value = env.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"endpoint {self.name!r}: environment variable {self.api_key_env} is not set"
            )
        return value

    def identity(self, *, credential: str | None, user: str | None = None) -> str:
        """SHA-256 hex digest over user, config fields and the resolved credential."""
        fields = self.model_dump(mode="json")
        blob = orjson.dumps(
            {"user": user, "endpoint": fields, "credential": credential},
            option=orjson.OPT_SORT_KEYS,
        )
        return hashlib.sha256(blob).hexdigest()
