"""OpenAPI 3.1 descriptions of rolltap's own HTTP APIs: the gateway's admin API and the
``rolltap serve`` API, each served at ``GET /openapi.json`` (no token).

The harness routes (``/r/{id}/v1/…``) are not described here: they are the OpenAI and
Anthropic APIs, whose own descriptions apply.
"""

from __future__ import annotations

from rolltap.openapi.admin import admin_document
from rolltap.openapi.common import add_openapi_route
from rolltap.openapi.serve import serve_document

__all__ = ["add_openapi_route", "admin_document", "serve_document"]
