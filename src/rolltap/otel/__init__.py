"""OpenTelemetry spans for rollouts and their model calls (the ``otel`` extra).

On with ``--otel`` (``eval``, ``gateway``, ``serve``) or when ``OTEL_EXPORTER_OTLP_ENDPOINT``
is set; off, a gateway does no tracing work at all and OpenTelemetry is never imported.
:func:`open_tracer` builds the exporting tracer; :class:`~rolltap.otel.tracer.GatewayTracer`
(imported from :mod:`rolltap.otel.tracer`, which needs the extra) takes any
``TracerProvider``, e.g. one with an in-memory exporter.
"""

from rolltap.otel.setup import ENDPOINT_VARS, open_tracer, otel_enabled, otel_requested

__all__ = ["ENDPOINT_VARS", "open_tracer", "otel_enabled", "otel_requested"]
