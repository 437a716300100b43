"""Spans for rollouts and their model calls, after the OpenTelemetry GenAI conventions.

:class:`GatewayTracer` is a :class:`~rolltap.gateway.observer.RolloutObserver` that a
gateway also hands every finished model call (``Gateway(..., tracer=...)``). A rollout
is an ``invoke_agent`` span from registration to its end; each model call a ``chat``
span under it, built once the call has ended from the events the gateway recorded for
it (model, usage, finish reason, error code, timing), so nothing is traced while the
call streams. A call whose request carries a W3C ``traceparent`` (or whatever the
configured propagators read) is parented under the harness's span instead, with a link
to its rollout's span.

Prompts and completions appear only with ``content=True``; credentials and rollout
metadata never do (only its ``task_id`` and ``sample``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider

from rolltap.config import EndpointConfig
from rolltap.events import Event, EventKind, EventLog
from rolltap.gateway.call import ModelCall
from rolltap.gateway.rollout import Rollout
from rolltap.otel.content import input_attributes, output_attributes

__all__ = ["GatewayTracer"]

#: ``gen_ai.provider.name`` by upstream dialect: the API's maker, as the conventions ask
#: when an OpenAI-compatible server stands behind it
_PROVIDERS = {
    "chat": "openai", "responses": "openai", "messages": "anthropic",
    "completions.vllm": "openai", "completions.llamacpp": "llama.cpp",
}  # fmt: skip
#: request fields lifted to ``gen_ai.request.*`` (numbers only)
_REQUEST_PARAMS = {
    "temperature": "gen_ai.request.temperature", "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k", "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens", "seed": "gen_ai.request.seed",
}  # fmt: skip
_ENDS = (EventKind.MODEL_RESPONSE, EventKind.MODEL_ERROR)


@dataclass(slots=True)
class _RolloutSpan:
    span: Span
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class GatewayTracer:
    """Rollout and model-call spans on ``provider`` (default: the global one).

    ``run_id`` is the ``rolltap.run.id`` of rollouts whose metadata names none.
    """

    def __init__(
        self,
        provider: TracerProvider | None = None,
        *,
        content: bool = False,
        run_id: str | None = None,
    ) -> None:
        from rolltap.version import __version__

        provider = provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("rolltap", __version__)
        self.content, self.run_id = content, run_id
        self._rollouts: dict[str, _RolloutSpan] = {}
        self._servers: dict[str, dict[str, Any]] = {}

    # -- RolloutObserver ---------------------------------------------------------------

    def rollout_registered(self, rollout: Rollout) -> None:
        attrs = {
            "gen_ai.operation.name": "invoke_agent",
            **self._common(rollout),
            "gen_ai.request.model": rollout.endpoint.model,
            **self._server(rollout.endpoint),
        }
        for key, name in (("task_id", "rolltap.task.id"), ("sample", "rolltap.rollout.sample")):
            value = rollout.metadata.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool):
                attrs[name] = value
        span = self._tracer.start_span(
            "invoke_agent", kind=SpanKind.INTERNAL, attributes=attrs,
            start_time=_ns(rollout.created),
        )  # fmt: skip
        self._rollouts[rollout.id] = _RolloutSpan(span)

    def call_finished(self, rollout: Rollout) -> None:
        """Nothing: :meth:`call_ended` is given the call itself."""

    def rollout_ended(self, rollout: Rollout, status: str) -> None:
        state = self._rollouts.pop(rollout.id, None)
        if state is None:
            return
        attrs: dict[str, Any] = {
            "rolltap.rollout.status": status,
            "rolltap.rollout.calls": state.calls,
            "gen_ai.usage.input_tokens": state.input_tokens,
            "gen_ai.usage.output_tokens": state.output_tokens,
        }
        if rollout.limit_reached is not None:
            attrs["rolltap.rollout.limit_reached"] = rollout.limit_reached
        state.span.set_attributes(attrs)
        state.span.end()

    # -- model calls -------------------------------------------------------------------

    def call_ended(self, call: ModelCall) -> None:
        """One ``chat`` span for ``call``, from its recorded events (it has ended)."""
        rollout = call.rollout
        request, end = _events_of(rollout.log, call.intercept.id)
        if end is None:
            return  # it never got as far as recording an outcome
        payload, state = end.payload, self._rollouts.get(rollout.id)
        end_ns = _ns(end.ts)
        total_ms = _number((payload.get("timing") or {}).get("total_ms"))
        start_ns = end_ns - int(total_ms * 1e6) if total_ms is not None else _start_of(request)
        failed = end.kind == EventKind.MODEL_ERROR
        attrs = self._call_attributes(call, payload, response=not failed)
        if failed:
            attrs["error.type"] = str(payload.get("code", "error"))
            if isinstance(payload.get("status"), int):
                attrs["rolltap.error.status"] = payload["status"]
        elif state is not None:
            state.input_tokens += attrs.get("gen_ai.usage.input_tokens", 0)
            state.output_tokens += attrs.get("gen_ai.usage.output_tokens", 0)
        if state is not None:
            state.calls += 1
        context, links = self._parent(call, state)
        span = self._tracer.start_span(
            f"chat {rollout.endpoint.model}", context=context, kind=SpanKind.CLIENT,
            attributes=attrs, links=links, start_time=start_ns or end_ns,
        )  # fmt: skip
        if "error.type" in attrs:
            # the code, not the message: an upstream's message may quote the request
            span.set_status(Status(StatusCode.ERROR, attrs["error.type"]))
        span.end(end_time=end_ns)

    def _parent(self, call: ModelCall, state: _RolloutSpan | None) -> tuple[Context, list[Link]]:
        harness = propagate.extract(call.request.headers, context=Context())
        if trace.get_current_span(harness).get_span_context().is_valid:
            links = [] if state is None else [Link(state.span.get_span_context())]
            return harness, links
        if state is None:
            return Context(), []
        return trace.set_span_in_context(state.span, Context()), []

    def _call_attributes(
        self, call: ModelCall, payload: Mapping[str, Any], *, response: bool
    ) -> dict[str, Any]:
        rollout, upstream = call.rollout, call.upstream_name
        provider = _PROVIDERS.get(upstream, upstream)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,
            "gen_ai.request.model": rollout.endpoint.model,
            "gen_ai.request.stream": call.stream,
            **self._common(rollout),
            "rolltap.call.id": call.intercept.id,
            "rolltap.harness.dialect": call.harness.name,
            "rolltap.upstream.dialect": upstream,
            **self._server(rollout.endpoint),
        }
        body = call.body
        for key, name in _REQUEST_PARAMS.items():
            if key in body and (value := _number(body[key])) is not None:
                attrs[name] = value
        if self.content:
            attrs.update(input_attributes(call.harness, call.body))
        if response:
            attrs.update(_response_attributes(payload, call.stream))
            if self.content:
                attrs.update(output_attributes(payload, rollout.endpoint.completions_api))
        return attrs

    def _common(self, rollout: Rollout) -> dict[str, Any]:
        attrs = {"gen_ai.conversation.id": rollout.session_id, "rolltap.rollout.id": rollout.id}
        run_id = rollout.metadata.get("run_id", self.run_id)
        if isinstance(run_id, str):
            attrs["rolltap.run.id"] = run_id
        return attrs

    def _server(self, endpoint: EndpointConfig) -> dict[str, Any]:
        cached = self._servers.get(endpoint.base_url)
        if cached is None:
            url = urlsplit(endpoint.base_url)  # hostname and port only: never userinfo
            cached = {"server.address": url.hostname or ""}
            if url.port is not None:
                cached["server.port"] = url.port
            self._servers[endpoint.base_url] = cached
        return cached


def _response_attributes(payload: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    usage = payload.get("usage")
    if isinstance(usage, dict):
        for key, name in (("prompt_tokens", "gen_ai.usage.input_tokens"),
                          ("completion_tokens", "gen_ai.usage.output_tokens")):  # fmt: skip
            if isinstance(usage.get(key), int):
                attrs[name] = usage[key]
    finish = payload.get("finish_reason")
    if isinstance(finish, str):
        attrs["gen_ai.response.finish_reasons"] = [finish]
    body = payload.get("body")
    if isinstance(body, dict):
        for key, name in (("model", "gen_ai.response.model"), ("id", "gen_ai.response.id")):
            if isinstance(body.get(key), str):
                attrs[name] = body[key]
    ttfc = _number((payload.get("timing") or {}).get("ttfc_ms"))
    if stream and ttfc is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = ttfc / 1000.0
    return attrs


def _events_of(log: EventLog, intercept_id: str) -> tuple[Event | None, Event | None]:
    """The request event and the outcome event of one call, searched from the end."""
    request = end = None
    for i in range(len(log) - 1, -1, -1):
        event = log[i]
        if event.payload.get("intercept_id") != intercept_id:
            continue
        if event.kind == EventKind.MODEL_REQUEST:
            request = event
            break
        if end is None and event.kind in _ENDS:
            end = event
    return request, end


def _start_of(request: Event | None) -> int | None:
    return None if request is None else _ns(request.ts)


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def _ns(ts: float) -> int:
    return int(ts * 1e9)
