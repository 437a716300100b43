"""The gateway's admin API (``rolltap gateway``'s first server), as OpenAPI 3.1."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rolltap.openapi.common import document, errors, json_ok, operation, path_param, text_ok
from rolltap.openapi.policy import policy_paths

__all__ = ["admin_document"]


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_POSITIVE_INT = {"type": "integer", "exclusiveMinimum": 0}
_REGISTER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "user": _nullable({"type": "string"}),
        "api_key": _nullable({"type": "string", "description": "a per-rollout upstream key"}),
        "metadata": _nullable({"type": "object"}),
        "endpoint": _nullable({"type": "string", "description": "one of the gateway's"}),
        "limits": _nullable({
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "max_turns": _nullable(_POSITIVE_INT),
                "max_tokens": _nullable(_POSITIVE_INT),
                "timeout_s": _nullable({"type": "number", "exclusiveMinimum": 0}),
            },
        }),
        "sampling": _nullable({"type": "object"}),
    },
}  # fmt: skip
_URLS = {
    "id": {"type": "string"},
    "base_url": {"type": "string"},
    "openai_base_url": {"type": "string"},
    "anthropic_base_url": {"type": "string"},
    "user": {"type": ["string", "null"]},
    "metadata": {"type": "object"},
}
_REGISTERED = {
    "type": "object",
    "required": [*_URLS, "api_key"],
    "properties": {**_URLS, "api_key": {"type": "string", "description": "the rollout secret"}},
}
_LISTED = {
    "type": "object",
    "required": [*_URLS, "events", "intercepts"],
    "properties": {**_URLS, "events": {"type": "integer"}, "intercepts": {"type": "integer"}},
}
_STATS = {
    "type": "object",
    "required": ["servers", "rollouts", "intercepts", "server_loads", "pool", "totals"],
    "properties": {
        "servers": {"type": "integer"},
        "rollouts": {"type": "integer"},
        "intercepts": {"type": "integer", "description": "calls in flight"},
        "server_loads": {"type": "array", "items": {"type": "object"}},
        "pool": {"type": "object"},
        "inflight": {"type": "object"},
        "replicas": {
            "type": "object",
            "description": "per endpoint with replicas: each replica's state and counters "
            "(up, down_reason, pinned_rollouts, in_flight, waiting, calls, errors, rejected, "
            "latency), the rollouts pinned and the re-pins",
            "additionalProperties": {"type": "object"},
        },
        "totals": {"type": "object"},
    },
}
_ID = [path_param("rollout_id")]
_SINCE = {
    "name": "since",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
    "description": "the first event's index (default 0)",
}


def admin_document(endpoints: Sequence[str] = ()) -> dict[str, Any]:
    """The admin API's OpenAPI 3.1 document; ``endpoints``: the names ``POST /rollouts``
    accepts for ``endpoint`` (any string when none are given)."""
    register = _REGISTER
    if endpoints:
        props = {**_REGISTER["properties"],
                 "endpoint": _nullable({"type": "string", "enum": list(endpoints)})}  # fmt: skip
        register = {**_REGISTER, "properties": props}
    paths = {
        "/rollouts": {
            "post": operation(
                "Register a rollout",
                {"201": json_ok(_REGISTERED, "registered"), **errors(429, 503)},
                body=register,
            ),
            "get": operation(
                "List registered rollouts",
                {"200": json_ok({"type": "object", "required": ["rollouts"], "properties": {
                    "rollouts": {"type": "array", "items": _LISTED}}})},
            ),
        },
        "/rollouts/{rollout_id}": {
            "delete": operation(
                "Unregister a rollout (undelivered calls get rollout_closed)",
                {"200": json_ok({"type": "object", "required": ["id", "status", "events"]}),
                 **errors(404)},
                parameters=_ID,
            ),
        },
        "/rollouts/{rollout_id}/events": {
            "get": operation(
                "A rollout's events",
                {"200": json_ok({"type": "object", "required": ["events"], "properties": {
                    "events": {"type": "array", "items": {"type": "object"}}}}),
                 **errors(400, 404)},
                parameters=[*_ID, _SINCE],
            ),
        },
        **policy_paths(endpoints),
        "/stats": {"get": operation("Gateway counters", {"200": json_ok(_STATS)})},
        "/metrics": {
            "get": operation("Prometheus metrics", {"200": text_ok("text/plain", "metrics")})
        },
        "/health": {
            "get": operation(
                "Liveness",
                {"200": json_ok({"type": "object", "required": ["status"]})},
                auth=False,
            )
        },
    }  # fmt: skip
    return document(
        "rolltap gateway admin API",
        "Register rollouts and read their events. Every route but /health and "
        "/openapi.json needs `Authorization: Bearer <admin token>`.",
        paths,
        {},
    )
