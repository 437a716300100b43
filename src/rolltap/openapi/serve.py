"""The ``rolltap serve`` API, as OpenAPI 3.1; the submission body comes from its
pydantic model, so the description cannot drift from what is validated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from rolltap.openapi.common import document, errors, json_ok, operation, path_param, text_ok
from rolltap.openapi.policy import policy_paths

__all__ = ["serve_document"]

_ID = [path_param("id")]
_ROLLOUT = {
    "type": "object",
    "required": ["id", "batch", "state"],
    "properties": {
        "id": {"type": "string"},
        "batch": {"type": "string"},
        "state": {"enum": ["running", "finished"]},
        "worker": {"type": "integer"},
        "result": {"type": "object"},
    },
}
_STATUS = {
    "type": "object",
    "required": ["state", "workers", "ready_workers", "capacity", "inflight", "store"],
    "properties": {
        "state": {"enum": ["running", "draining"]},
        "workers": {"type": "array", "items": {"type": "object"}},
        "ready_workers": {"type": "integer"},
        "capacity": {"type": "integer"},
        "inflight": {"type": "integer"},
        "store": {"type": "object"},
    },
}


def _submission(model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's schema and the component schemas it refers to."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return schema, {model.__name__: schema, **defs}


def _narrow(
    schemas: dict[str, Any], body: str, endpoints: Sequence[str] | None, max_batch: int | None,
    test_hooks: bool,
) -> None:  # fmt: skip
    """What this service takes: its endpoint names, its batch size, no test hook when off."""
    spec = schemas.get("RolloutSpec", {}).get("properties", {})
    if endpoints is not None and "endpoint" in spec:
        spec["endpoint"] = {"enum": [*endpoints, None], "default": None}
    if not test_hooks:
        spec.pop("block_loop_s", None)
    rollouts = schemas[body].get("properties", {}).get("rollouts")
    if max_batch is not None and rollouts is not None:
        rollouts["maxItems"] = max_batch


def serve_document(
    submit: type[BaseModel],
    *,
    endpoints: Sequence[str] | None = None,
    max_batch: int | None = None,
    test_hooks: bool = True,
) -> dict[str, Any]:
    """The serve API's OpenAPI 3.1 document; ``submit`` is the ``POST /rollouts`` body.

    ``endpoints``, ``max_batch`` and ``test_hooks`` narrow it to one service's settings.
    """
    _, schemas = _submission(submit)
    _narrow(schemas, submit.__name__, endpoints, max_batch, test_hooks)
    body = {"$ref": f"#/components/schemas/{submit.__name__}"}
    ndjson = text_ok(
        "application/x-ndjson",
        "one JSON object a line: accepted, a result per rollout, keepalives, end",
    )
    paths = {
        "/rollouts": {
            "post": operation(
                "Submit a batch of rollouts; results stream back as NDJSON",
                {"200": ndjson, **errors(403, 503, 507)},
                body=body, body_required=True,
            )
        },
        "/rollouts/{id}": {
            "get": operation(
                "Where one rollout stands", {"200": json_ok(_ROLLOUT), **errors(404)},
                parameters=_ID,
            ),
            "delete": operation(
                "Cancel one running rollout",
                {"202": json_ok({"type": "object", "required": ["id", "state"]}), **errors(404)},
                parameters=_ID,
            ),
        },
        "/batches/{id}": {
            "delete": operation(
                "Cancel every unfinished rollout of a batch",
                {"202": json_ok({"type": "object", "required": ["batch", "cancelling"]}),
                 **errors(404)},
                parameters=_ID,
            )
        },
        "/status": {"get": operation("Workers, capacity, totals", {"200": json_ok(_STATUS)})},
        "/metrics": {
            "get": operation("Prometheus metrics", {"200": text_ok("text/plain", "metrics")})
        },
        "/health": {
            "get": operation(
                "Liveness and ready workers",
                {"200": json_ok({"type": "object", "required": ["status", "ready_workers"]})},
                auth=False,
            )
        },
        # the trainer's versions and pauses, applied to every worker's gateway
        **policy_paths(endpoints or ()),
    }  # fmt: skip
    return document(
        "rolltap serve API",
        "Run rollouts on supervised workers. Every route but /health and /openapi.json "
        "needs `Authorization: Bearer <serve token>`.",
        paths,
        schemas,
    )
