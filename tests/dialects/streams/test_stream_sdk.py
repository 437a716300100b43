"""Every (source parser → target renderer) pair, judged by the target's official SDK."""

from __future__ import annotations

import anthropic
import openai
import pytest

from dialects.streams.sdk_judges import JUDGES, Outcome, anthropic_client, openai_client
from dialects.streams.streamkit import SCENARIOS, Scenario, translate, upstream
from rolltap.dialects.canonical import BlockDelta, BlockStart, StreamStart
from rolltap.dialects.streams import DIALECTS, stream_renderer
from rolltap.errors import RolltapError, UpstreamTimeoutError

PAIRS = [(source, target) for source in DIALECTS for target in DIALECTS]
_STOPS = {
    "chat": {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"},
    "messages": {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"},
    "responses": {
        "end_turn": "completed",
        "tool_use": "completed",
        "max_tokens": "incomplete:max_output_tokens",
    },
}
_SIGNED = ("messages", "responses")  # dialects that carry a reasoning signature


def expected(scenario: Scenario, source: str, target: str) -> Outcome:
    signature = None
    if source in _SIGNED and target in _SIGNED:
        signature = next((b.signature for b in scenario.blocks if b.signature), None)
    return Outcome(
        text=scenario.joined("text"),
        reasoning=scenario.joined("reasoning"),
        calls=scenario.calls(),
        stop=_STOPS[target][scenario.stop],
        input_tokens=scenario.usage.input_tokens,
        output_tokens=scenario.usage.output_tokens,
        cache_read=scenario.usage.cache_read_tokens,
        signature=signature,
    )


def normalized(outcome: Outcome) -> Outcome:
    """Cache reads of 0 and absent cache reads are the same fact."""
    return Outcome(**{**outcome.__dict__, "cache_read": outcome.cache_read or None})


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s}-to-{t}" for s, t in PAIRS])
async def test_sdk_folds_translated_stream(source: str, target: str, scenario: Scenario) -> None:
    body = translate(source, target, upstream(source, scenario))
    outcome = await JUDGES[target](body)
    assert normalized(outcome) == expected(scenario, source, target)


@pytest.mark.parametrize("target", DIALECTS)
@pytest.mark.parametrize("source", ["messages", "responses"])
async def test_interleaved_block_upstreams(source: str, target: str) -> None:
    """Anthropic and Responses servers send one block after another, but the
    parsers key deltas by index, so interleaved blocks translate as well."""
    scenario = next(s for s in SCENARIOS if s.name == "parallel_tools")
    body = translate(source, target, upstream(source, scenario, interleave=True))
    outcome = await JUDGES[target](body)
    assert normalized(outcome) == expected(scenario, source, target)


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s}-to-{t}" for s, t in PAIRS])
async def test_keepalives_are_no_ops(source: str, target: str) -> None:
    scenario = next(s for s in SCENARIOS if s.name == "tool_call")
    wire = upstream(source, scenario)
    plain = await JUDGES[target](translate(source, target, wire))
    with_keepalives = await JUDGES[target](translate(source, target, wire, keepalive=True))
    assert with_keepalives == plain


def _broken_stream(target: str, err: RolltapError) -> bytes:
    """A stream that starts, sends some text, then reports ``err`` in-band."""
    renderer = stream_renderer(target, model="harness-model")
    head = renderer.render(StreamStart("id-1", "up")) + renderer.render(BlockStart(0, "text"))
    return head + renderer.render(BlockDelta(0, "partial")) + renderer.error(err)


@pytest.mark.parametrize("target", ["chat", "responses"])
async def test_in_band_error_makes_openai_sdk_raise(target: str) -> None:
    body = _broken_stream(target, UpstreamTimeoutError("upstream timed out"))
    async with openai_client(body) as client:
        with pytest.raises(openai.APIError, match="upstream timed out"):
            if target == "chat":
                chunks = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                async for _ in chunks:
                    pass
            else:
                events = await client.responses.create(model="m", input="hi", stream=True)
                async for _ in events:
                    pass


async def test_in_band_error_makes_anthropic_sdk_raise() -> None:
    body = _broken_stream("messages", UpstreamTimeoutError("upstream timed out"))
    async with (
        anthropic_client(body) as client,
        client.messages.stream(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        with pytest.raises(anthropic.APIStatusError, match="upstream timed out") as caught:
            async for _ in stream:
                pass
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "api_error"
