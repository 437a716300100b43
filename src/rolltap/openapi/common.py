"""What both API descriptions share: the error shape, auth, response helpers."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

__all__ = [
    "JSON",
    "add_openapi_route",
    "document",
    "errors",
    "json_ok",
    "operation",
    "text_ok",
]

JSON = "application/json"
Schema = dict[str, Any]

ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": "string", "description": "rolltap's stable error code"},
                "param": {"type": "string", "description": "the offending field"},
            },
        }
    },
}

#: why each error status can come, for the descriptions
_WHY = {
    400: "malformed_json / invalid_request (param names the field) / invalid_config",
    401: "invalid_api_key: a missing or wrong bearer token",
    403: "harness_not_allowed: the spec names code that is not on the allowlist",
    404: "not_found / rollout_not_found",
    405: "method_not_allowed",
    408: "request_timeout: the body did not arrive within ROLLTAP_BODY_TIMEOUT_S",
    413: "request_too_large",
    429: "auth_rate_limited (after 10 failed authentications a minute) / model_pool_full "
    "/ service_full; Retry-After says when to retry",
    502: "forward_pause_failed: the engine did not take a pause or resume forwarded to it "
    "(forward_pause)",
    503: "gateway_closed / service_draining / store_unavailable (the store is unreachable: "
    "retry after Retry-After)",
    507: "store_full: a write found the store full; new batches are refused for Retry-After "
    "(30 s) after the last such failure: free space",
}


def errors(*statuses: int) -> dict[str, Any]:
    """Error responses with rolltap's error body, one per status."""
    return {
        str(status): {
            "description": _WHY[status],
            "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for status in statuses
    }


def json_ok(schema: Schema, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def text_ok(media: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": {"type": "string"}}}}


def operation(
    summary: str,
    responses: dict[str, Any],
    *,
    auth: bool = True,
    body: Schema | None = None,
    body_required: bool = False,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One operation; an authenticated one documents 401 and 429 (rate limited) too."""
    op: dict[str, Any] = {"summary": summary, "responses": dict(responses)}
    if auth:
        op["responses"].update(errors(401, 429))
        op["security"] = [{"bearer": []}]
    else:
        op["security"] = []
    if body is not None:
        op["requestBody"] = {"required": body_required, "content": {JSON: {"schema": body}}}
        op["responses"].update(errors(400, 408, 413))
    if parameters:
        op["parameters"] = parameters
    return op


def path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def document(
    title: str, description: str, paths: dict[str, Any], schemas: dict[str, Schema]
) -> dict[str, Any]:
    """A whole OpenAPI 3.1 document; it describes its own route, ``GET /openapi.json``
    (served by :func:`add_openapi_route` without a token)."""
    own = {"get": operation("This document", {"200": json_ok({"type": "object"})}, auth=False)}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1", "description": description},
        "paths": {**paths, "/openapi.json": own},
        "components": {
            "schemas": {"Error": ERROR, **schemas},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def add_openapi_route(app: web.Application, doc: dict[str, Any]) -> None:
    """Serve ``doc`` at ``GET /openapi.json`` (no token: it holds no secret)."""
    body = orjson.dumps(doc)

    async def openapi(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=JSON)

    app.router.add_get("/openapi.json", openapi)
