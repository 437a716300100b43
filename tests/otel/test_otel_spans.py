"""Rollout and model-call spans, through the gateway to the simulator with the OpenAI SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from rolltap.config import EndpointConfig, GatewaySettings, Timeouts
from rolltap.gateway import Gateway, Rollout
from rolltap.otel.tracer import GatewayTracer
from rolltap.sim import Simulator

PROMPT = "zebra-crossing-4417 tell me something"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
UPSTREAM_KEY = "sk-upstream-secret-31337"

TracedGateway = Callable[..., Awaitable[Gateway]]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exported = InMemorySpanExporter()
    yield exported
    exported.clear()


@pytest.fixture
async def traced(sim: Simulator, exporter: InMemorySpanExporter) -> AsyncIterator[TracedGateway]:
    """Gateways in front of ``sim`` whose tracer exports to ``exporter`` (an injected
    provider: the global one can be set only once per process)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gateways: list[Gateway] = []

    async def factory(*, content: bool = False, read_timeout: float = 10.0) -> Gateway:
        endpoint = EndpointConfig(
            base_url=sim.base_url, model="sim-model", timeouts=Timeouts(read=read_timeout)
        )
        tracer = GatewayTracer(provider, content=content, run_id="run-42")
        gateway = Gateway(endpoint, GatewaySettings(admin_token="t"), tracer=tracer)
        await gateway.start()
        gateways.append(gateway)
        return gateway

    yield factory
    for gateway in gateways:
        await gateway.aclose()
    provider.shutdown()


def client(gateway: Gateway, rollout: Rollout, **kwargs: Any) -> openai.AsyncOpenAI:
    urls = gateway.describe(rollout)
    return openai.AsyncOpenAI(
        base_url=urls["openai_base_url"], api_key=urls["api_key"], max_retries=0, **kwargs
    )


def by_name(spans: tuple[ReadableSpan, ...]) -> tuple[ReadableSpan, list[ReadableSpan]]:
    (root,) = [s for s in spans if s.name == "invoke_agent"]
    calls = sorted((s for s in spans if s.name != "invoke_agent"), key=lambda s: s.start_time or 0)
    assert len(calls) + 1 == len(spans)
    return root, calls


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_one_rollout_span_with_one_child_per_call(
    traced: TracedGateway, exporter: InMemorySpanExporter
) -> None:
    gateway = await traced()
    rollout = await gateway.register(metadata={"task_id": "t7", "sample": 2, "note": "hidden"})
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    async with client(gateway, rollout) as sdk:
        first = await sdk.chat.completions.create(
            model="m", messages=messages, temperature=0.25, max_tokens=9
        )
        stream = await sdk.chat.completions.create(
            model="m", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
    # each call's span ends with the call; the rollout's is still open
    assert [s.name for s in exporter.get_finished_spans()] == ["chat sim-model"] * 2
    await gateway.unregister(rollout.id)

    root, calls = by_name(exporter.get_finished_spans())
    assert root.kind == SpanKind.INTERNAL and root.parent is None
    assert attrs(root) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": rollout.id,
        "rolltap.rollout.id": rollout.id, "rolltap.run.id": "run-42",
        "gen_ai.request.model": "sim-model", "server.address": "127.0.0.1",
        "server.port": urlsplit(rollout.endpoint.base_url).port,
        "rolltap.task.id": "t7", "rolltap.rollout.sample": 2,
        "rolltap.rollout.status": "completed", "rolltap.rollout.calls": 2,
        "gen_ai.usage.input_tokens": sum(attrs(c)["gen_ai.usage.input_tokens"] for c in calls),
        "gen_ai.usage.output_tokens": sum(attrs(c)["gen_ai.usage.output_tokens"] for c in calls),
    }  # fmt: skip
    assert [c.kind for c in calls] == [SpanKind.CLIENT, SpanKind.CLIENT]
    for call in calls:
        assert call.name == "chat sim-model"
        assert call.parent is not None and call.parent.span_id == root.context.span_id
        assert call.context.trace_id == root.context.trace_id
        assert call.status.status_code == StatusCode.UNSET
        assert root.start_time <= call.start_time <= call.end_time <= root.end_time  # type: ignore[operator]
        a = attrs(call)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "openai"
        assert a["gen_ai.request.model"] == "sim-model"
        assert a["gen_ai.conversation.id"] == rollout.id and a["rolltap.run.id"] == "run-42"
        assert "error.type" not in a
    one, two = (attrs(c) for c in calls)
    assert first.usage is not None and chunks[-1].usage is not None
    assert one["gen_ai.response.finish_reasons"] == (first.choices[0].finish_reason,)
    finish = next(
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    )
    assert two["gen_ai.response.finish_reasons"] == (finish,)
    assert one["gen_ai.response.model"] == first.model
    assert one["gen_ai.response.id"] == first.id
    assert one["gen_ai.usage.input_tokens"] == first.usage.prompt_tokens
    assert one["gen_ai.usage.output_tokens"] == first.usage.completion_tokens
    assert one["gen_ai.request.temperature"] == 0.25 and one["gen_ai.request.max_tokens"] == 9
    assert one["gen_ai.request.stream"] is False and two["gen_ai.request.stream"] is True
    assert two["gen_ai.usage.output_tokens"] == chunks[-1].usage.completion_tokens
    assert two["gen_ai.response.time_to_first_chunk"] > 0
    assert one["rolltap.call.id"] != two["rolltap.call.id"]


@pytest.mark.parametrize(
    ("fault", "stream", "code"),
    [("status=500", False, "upstream_http_error"), ("drop=2", True, "upstream_bad_response"),
     ("stall=30", False, "upstream_timeout")],
)  # fmt: skip
async def test_upstream_failure_is_an_error_span(
    traced: TracedGateway, exporter: InMemorySpanExporter, fault: str, stream: bool, code: str
) -> None:
    gateway = await traced(read_timeout=0.5)
    rollout = await gateway.register()
    async with client(gateway, rollout, default_headers={"x-sim-fault": fault}) as sdk:
        with pytest.raises(openai.APIError):
            reply = await sdk.chat.completions.create(
                model="m", messages=[{"role": "user", "content": PROMPT}], stream=stream
            )
            if stream:
                async for _ in reply:  # type: ignore[union-attr]
                    pass
    await gateway.unregister(rollout.id)
    root, (call,) = by_name(exporter.get_finished_spans())
    assert call.status.status_code == StatusCode.ERROR
    assert call.status.description == code
    assert attrs(call)["error.type"] == code
    assert "gen_ai.usage.output_tokens" not in attrs(call)
    assert call.parent is not None and call.parent.span_id == root.context.span_id
    assert root.status.status_code == StatusCode.UNSET  # a failed call need not fail the rollout


async def test_harness_traceparent_parents_the_call_span(
    traced: TracedGateway, exporter: InMemorySpanExporter
) -> None:
    gateway = await traced()
    rollout = await gateway.register()
    async with client(gateway, rollout) as sdk:
        await sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}],
            extra_headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
        )  # fmt: skip
        await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    await gateway.unregister(rollout.id)
    root, (with_header, without) = by_name(exporter.get_finished_spans())
    assert with_header.context.trace_id == int(TRACE_ID, 16)
    assert with_header.parent is not None and with_header.parent.span_id == int(PARENT_ID, 16)
    assert with_header.parent.is_remote
    # the rollout stays reachable from the harness's trace
    assert [link.context.span_id for link in with_header.links] == [root.context.span_id]
    assert without.parent is not None and without.parent.span_id == root.context.span_id
    assert without.context.trace_id == root.context.trace_id != int(TRACE_ID, 16)


def everything_recorded(spans: tuple[ReadableSpan, ...]) -> str:
    """Every attribute and event of every span, as one string to search."""
    parts: list[str] = []
    for span in spans:
        parts.append(json.dumps(attrs(span), default=str))
        parts.extend(json.dumps(dict(e.attributes or {}), default=str) for e in span.events)
        parts.append(span.name + (span.status.description or ""))
    return "\n".join(parts)


@pytest.mark.parametrize("content", [False, True])
async def test_prompts_and_completions_only_with_content_capture(
    traced: TracedGateway, exporter: InMemorySpanExporter, content: bool
) -> None:
    gateway = await traced(content=content)
    rollout = await gateway.register(api_key=UPSTREAM_KEY)
    async with client(gateway, rollout) as sdk:
        reply = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": "be-terse-9912"},
                      {"role": "user", "content": PROMPT}],
        )  # fmt: skip
    await gateway.unregister(rollout.id)
    spans = exporter.get_finished_spans()
    recorded = everything_recorded(spans)
    answer = reply.choices[0].message.content
    assert answer
    # never a credential, content or not: the rollout's secret nor the upstream key
    assert rollout.secret not in recorded and UPSTREAM_KEY not in recorded
    if not content:
        assert "zebra" not in recorded and "be-terse" not in recorded
        assert answer not in recorded
        return
    _, (call,) = by_name(spans)
    a = attrs(call)
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}
    ]
    assert json.loads(a["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "be-terse-9912"}
    ]
    assert json.loads(a["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": answer}],
         "finish_reason": "stop"}
    ]  # fmt: skip
