"""When tracing is on, and the provider that exports its spans over OTLP/HTTP.

Nothing here imports OpenTelemetry until tracing is asked for, so ``import rolltap``
(and a gateway with tracing off) never does.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from rolltap.errors import MissingExtraError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from rolltap.otel.tracer import GatewayTracer

__all__ = ["ENDPOINT_VARS", "open_tracer", "otel_enabled", "otel_requested"]

log = logging.getLogger("rolltap.otel")

#: setting either turns tracing on (unless ``--no-otel``); the exporter reads them too
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def otel_requested(flag: bool | None) -> bool:
    """``--otel`` / ``--no-otel`` decide; without either, an OTLP endpoint in the
    environment turns tracing on (and ``OTEL_SDK_DISABLED=true`` keeps it off)."""
    if flag is not None:
        return flag
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name) for name in ENDPOINT_VARS)


def _missing() -> MissingExtraError | None:
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        missing = MissingExtraError.for_extra("otel", "opentelemetry-sdk")
        missing.__cause__ = exc
        return missing
    return None


def otel_enabled(flag: bool | None) -> bool:
    """Whether tracing runs: requested (:func:`otel_requested`) and the extra installed.

    Raises ``MissingExtraError`` when ``--otel`` was given without the ``otel`` extra;
    an endpoint variable alone (maybe meant for other programs) only logs a warning.
    """
    if not otel_requested(flag):
        return False
    missing = _missing()
    if missing is None:
        return True
    if flag:
        raise missing
    _warn_once(missing.message)
    return False


@functools.cache
def _warn_once(message: str) -> None:
    log.warning("an OTLP endpoint is set but tracing is off: %s", message)


def otlp_provider() -> TracerProvider:
    """A provider batching spans to the OTLP/HTTP endpoint the ``OTEL_*`` variables name
    (default ``http://localhost:4318/v1/traces``); service ``rolltap`` unless
    ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` name another."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "rolltap"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@asynccontextmanager
async def open_tracer(
    flag: bool | None,
    *,
    content: bool = False,
    run_id: str | None = None,
) -> AsyncIterator[GatewayTracer | None]:
    """The tracer a gateway is given (``None`` when tracing is off), exporting over
    OTLP/HTTP; at exit its last spans are flushed. ``content`` records prompts and
    completions; ``run_id`` is the ``rolltap.run.id`` of its rollouts."""
    if not otel_enabled(flag):
        yield None
        return
    from rolltap.otel.tracer import GatewayTracer

    provider = otlp_provider()
    try:
        yield GatewayTracer(provider, content=content, run_id=run_id)
    finally:
        # the exporter's last batch is a blocking HTTP POST: off the event loop
        await asyncio.to_thread(provider.shutdown)
