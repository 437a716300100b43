"""The Anthropic Messages wire dialect (``/v1/messages``).

* :mod:`.dialect` — the translators and error bodies ``DIALECT`` points at
* :mod:`.parse` — request bodies to canonical requests
* :mod:`.render` — canonical requests to request bodies
* :mod:`.response` — response bodies to and from canonical responses
* :mod:`.plain` — the shape almost every request has, recognised without building anything
* :mod:`.stream_parse` — upstream streams to canonical stream events
* :mod:`.stream_render` — canonical stream events to the harness's stream
"""

from __future__ import annotations

from rolltap.dialects.canonical import Dialect
from rolltap.dialects.messages import dialect as _dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    name="messages",
    path="/v1/messages",
    validate_request=_dialect.validate_request,
    validate_body=_dialect.validate_body,
    to_canonical=_dialect.to_canonical,
    from_canonical=_dialect.from_canonical,
    response_to_canonical=_dialect.response_to_canonical,
    response_from_canonical=_dialect.response_from_canonical,
    error_body=_dialect.error_body,
    upstream_error_detail=_dialect.upstream_error_detail,
)
