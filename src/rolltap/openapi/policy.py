"""The policy routes (:mod:`rolltap.gateway.policy_routes`) as OpenAPI 3.1 paths, shared by
the gateway's admin API and ``rolltap serve``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rolltap.openapi.common import errors, json_ok, operation

__all__ = ["policy_paths"]

_GATE = {
    "type": "object",
    "required": ["version", "epoch", "paused", "in_flight", "held"],
    "properties": {
        "version": {"type": ["string", "null"]},
        "epoch": {"type": "integer", "description": "bumped on every change of version"},
        "paused": {"enum": ["hold", "drain", "abort", None]},
        "paused_for_s": {"type": ["number", "null"]},
        "in_flight": {"type": "integer"},
        "held": {"type": "integer", "description": "calls waiting for a resume"},
        "pauses": {"type": "integer"},
        "cut": {"type": "integer"},
        "refused": {"type": "integer"},
        "max_staleness": {"type": ["integer", "null"]},
        "rollouts_per_version": {"type": ["integer", "null"]},
        "began": {
            "type": ["integer", "null"],
            "description": "rollouts begun, counted against max_staleness × "
            "rollouts_per_version (null: not counted here)",
        },
        "held_ahead": {
            "type": "integer",
            "description": "new rollouts waiting for a policy version (the gateway's)",
        },
    },
}
_POLICY = {
    "type": "object",
    "required": ["endpoints"],
    "properties": {
        "endpoints": {"type": "object", "additionalProperties": _GATE},
        "cut": {"type": "integer", "description": "requests an abort pause cut"},
    },
}


def _body(fields: dict[str, Any], required: list[str], endpoints: Sequence[str]) -> dict[str, Any]:
    name: dict[str, Any] = {"type": "string", **({"enum": list(endpoints)} if endpoints else {})}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": {**fields, "endpoint": {"anyOf": [name, {"type": "null"}]}},
    }


def policy_paths(endpoints: Sequence[str] = ()) -> dict[str, Any]:
    """``/policy``, ``/pause`` and ``/resume``; ``endpoints``: the names they accept."""
    version = {"version": {"type": ["string", "null"]}}
    mode = {"mode": {"enum": ["hold", "drain", "abort"]}}
    return {
        "/policy": {
            "get": operation("Each endpoint's policy version and pause",
                             {"200": json_ok(_POLICY)}),
            "post": operation(
                "Set the current policy version (every endpoint, or `endpoint`)",
                {"200": json_ok(_POLICY), **errors(400)},
                body=_body(version, ["version"], endpoints), body_required=True,
            ),
        },
        "/pause": {
            "post": operation(
                "Pause: new calls wait; hold lets calls in flight run on, drain answers "
                "once none is left, abort cuts them",
                {"200": json_ok(_POLICY), **errors(400, 502)},
                body=_body(mode, ["mode"], endpoints), body_required=True,
            )
        },
        "/resume": {
            "post": operation(
                "Resume: held calls go, in arrival order",
                {"200": json_ok(_POLICY), **errors(400, 502)},
                body=_body({}, [], endpoints),
            )
        },
    }  # fmt: skip
