"""Endpoint configuration and its identity digest.

An :class:`EndpointConfig` names an upstream model endpoint. It holds the *name* of the
environment variable with the API key, never the key itself, so configs can be logged,
stored and compared freely. The resolved credential only enters the SHA-256 identity.

>>> cfg = EndpointConfig(base_url="http://127.0.0.1:8080/v1", model="gemma")
>>> len(cfg.identity(credential=None))
64

An endpoint names its address as ``base_url`` or, for several inference replicas of one
model, as ``replicas`` (exactly one of the two). With replicas, ``base_url`` reads as the
first replica, so code that knows one address keeps working (and sends everything there);
:attr:`EndpointConfig.replica_urls` and :meth:`EndpointConfig.for_replica` are the
replica-aware view. Serialized, the endpoint holds only the one it was given.

>>> two = EndpointConfig(replicas=["http://a:8000/v1", "http://b:8000/v1"], model="m")
>>> two.base_url, two.for_replica("http://b:8000/v1").base_url
('http://a:8000/v1', 'http://b:8000/v1')
>>> "base_url" in two.model_dump()
False
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from rolltap.errors import ConfigError

__all__ = ["ClientKind", "Dialect", "EndpointConfig", "Timeouts"]


def _checked_url(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(f"{field} must start with http:// or https://")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- parsed for its error
    except ValueError as exc:
        raise ValueError(f"{field} is not a URL ({exc}): {value!r}") from exc
    if not parts.hostname:
        raise ValueError(f"{field} names no host: {value!r}")
    return value.rstrip("/")


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
    #: the upstream's address; with ``replicas`` given instead, the first replica
    base_url: str = ""
    #: several inference replicas of one model, instead of ``base_url``: each rollout is
    #: pinned to one of them (rolltap.clients.replicas)
    replicas: tuple[str, ...] = ()
    #: a replica that refused a connection, or did not accept one within
    #: ``timeouts.connect``, gets no new rollouts for this long
    replica_cooloff_s: float = Field(default=10.0, gt=0)
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
    #: the token client's upstream API: ``/v1/completions`` (vLLM, SGLang), llama.cpp's
    #: ``/completion``, vLLM's ``/inference/v1/generate`` or SGLang's ``/generate``
    completions_api: Literal["vllm", "llamacpp", "vllm-generate", "sglang"] = "vllm"
    #: how completions are parsed into text, reasoning and tool calls (rolltap.tokens.parsers)
    tool_parser: str = "hermes"
    #: how the completion's reasoning is split off first: ``think``, ``harmony`` or
    #: ``none``; None: the tool parser's own (``harmony`` for ``openai``, else ``think``)
    reasoning_parser: str | None = None
    template_kwargs: dict[str, Any] = Field(default_factory=dict)
    #: tokens besides the tokenizer's EOS that end a turn (e.g. Gemma's ``<end_of_turn>``)
    eos_tokens: tuple[str, ...] = ()
    #: a chat relay asks the server for the ids it saw and sampled (vLLM's
    #: ``return_token_ids``), records them, and hands the harness its answer without them
    capture_tokens: bool = False
    #: with ``capture_tokens``: logprobs too (asked for when the harness did not)
    capture_logprobs: bool = False
    #: a translated call's fields the upstream's dialect cannot express: ``drop`` them
    #: (each recorded in the request event's rewrites) or ``refuse`` the call with a 400
    #: naming the field (docs/translation.md). Not part of the identity: it changes no
    #: model client, only what a rollout's upstream sends on it.
    unsupported: Literal["drop", "refuse"] = "drop"
    #: tell the engine when the gateway pauses and resumes this endpoint (``POST /pause``):
    #: vLLM's ``/pause?mode=…`` and ``/resume``, or SGLang's ``/pause_generation`` and
    #: ``/continue_generation``, so both agree; None: the gateway pauses alone. Not part
    #: of the identity.
    forward_pause: Literal["vllm", "sglang"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_address(cls, data: Any) -> Any:
        """Exactly one of ``base_url`` and ``replicas``; with replicas, ``base_url`` is the
        first of them."""
        if not isinstance(data, dict):
            return data
        base_url, replicas = data.get("base_url"), data.get("replicas")
        if base_url is not None and replicas is not None:
            raise ValueError("give either base_url or replicas, not both")
        if base_url is None and replicas is None:
            raise ValueError("give base_url (one URL) or replicas (a list of URLs)")
        if replicas is None:
            return data
        if isinstance(replicas, str) or not isinstance(replicas, list | tuple):
            raise ValueError("replicas must be a list of URLs")
        if not replicas:
            raise ValueError("replicas must list at least one URL")
        return {**data, "base_url": replicas[0]}

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _checked_url("base_url", value)

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not name or any(c in name for c in ":\r\n\0 ") or any(c in text for c in "\r\n\0"):
                raise ValueError(
                    f"headers: {name!r} is not a header name, or its value holds a line break"
                )
        return value

    @field_validator("replicas")
    @classmethod
    def _check_replicas(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        urls = tuple(_checked_url("replicas", url) for url in value)
        if len(set(urls)) != len(urls):
            raise ValueError("replicas must not repeat a URL")
        return urls

    @model_serializer(mode="wrap")
    def _dump_one_address(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only the field the endpoint was given, so a dump validates back; an endpoint
        # without replicas dumps as it did before they existed (same identity digest), and
        # one without a reasoning parser as before that field existed.
        data: dict[str, Any] = handler(self)
        if self.reasoning_parser is None:
            data.pop("reasoning_parser", None)
        for name in ("capture_tokens", "capture_logprobs"):
            if not data.get(name):  # off: the digest of an endpoint from before them
                data.pop(name, None)
        if self.unsupported == "drop":  # the default: dumps as before the field existed
            data.pop("unsupported", None)
        if self.forward_pause is None:  # likewise
            data.pop("forward_pause", None)
        if self.replicas:
            data.pop("base_url", None)
        else:
            data.pop("replicas", None)
            data.pop("replica_cooloff_s", None)
        return data

    @property
    def replica_urls(self) -> tuple[str, ...]:
        """The replicas, or ``(base_url,)`` for an endpoint without them."""
        return self.replicas or (self.base_url,)

    def for_replica(self, url: str) -> EndpointConfig:
        """This endpoint at one of its replicas only: what that replica's model client
        is built from (and keyed by, in the pool)."""
        if url not in self.replica_urls:
            raise ConfigError(f"endpoint {self.name!r} has no such replica")
        fields = self.model_dump()
        fields.pop("replicas", None)
        fields.pop("replica_cooloff_s", None)
        return EndpointConfig.model_validate({**fields, "base_url": url})

    @model_validator(mode="after")
    def _check_client(self) -> EndpointConfig:
        if self.client == "tokens" and not self.tokenizer:
            raise ValueError("client 'tokens' needs a tokenizer (a local tokenizer directory)")
        if self.capture_logprobs and not self.capture_tokens:
            raise ValueError("capture_logprobs needs capture_tokens")
        if self.capture_tokens and (self.client != "relay" or self.dialect != "chat"):
            # the token client has the ids already; only vLLM's chat route returns them
            raise ValueError(
                "capture_tokens needs a chat relay endpoint (client 'relay', dialect 'chat')"
            )
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
        fields.pop("unsupported", None)  # a policy of the rollouts', not of the client
        fields.pop("forward_pause", None)  # the gateway's to send, not the client's
        blob = orjson.dumps(
            {"user": user, "endpoint": fields, "credential": credential},
            option=orjson.OPT_SORT_KEYS,
        )
        return hashlib.sha256(blob).hexdigest()
