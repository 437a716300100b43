"""Renderer invariants and the less common upstream shapes, one by one."""

from __future__ import annotations

import orjson

from dialects.streams.sdk_judges import judge_chat
from dialects.streams.streamkit import SCENARIOS, frame, translate, upstream
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockStart,
    BlockStop,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Usage,
)
from rolltap.dialects.sse import SSESplitter
from rolltap.dialects.streams import (
    ChatStreamRenderer,
    MessagesStreamParser,
    ResponsesStreamParser,
    stream_renderer,
)


def payloads(wire: bytes) -> list[dict[str, object]]:
    return [
        orjson.loads(e.data)
        for e in SSESplitter().feed(wire)
        if e.data is not None and e.data != b"[DONE]"
    ]


def test_responses_sequence_numbers_count_up_and_item_ids_are_unique() -> None:
    scenario = next(s for s in SCENARIOS if s.name == "parallel_tools")
    events = payloads(translate("chat", "responses", upstream("chat", scenario)))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    ids = [item["id"] for item in added]  # type: ignore[index]
    assert len(set(ids)) == len(ids) == 2


async def test_chat_usage_chunk_only_when_asked() -> None:
    events: list[StreamEvent] = [
        StreamStart("c1", "up"),
        BlockStart(0, "text"),
        BlockDelta(0, "hi"),
        BlockStop(0),
        StreamEnd("end_turn", Usage(3, 1)),
    ]
    without = b"".join(map(ChatStreamRenderer(model="m").render, events))
    with_usage = b"".join(map(ChatStreamRenderer(model="m", include_usage=True).render, events))
    assert b'"usage"' not in without
    assert without.endswith(b"data: [DONE]\n\n")
    assert payloads(with_usage)[-1]["choices"] == []
    outcome = await judge_chat(without)
    assert (outcome.text, outcome.input_tokens) == ("hi", -1)  # no usage reached the SDK


def test_keepalive_frames() -> None:
    assert stream_renderer("chat", model="m").keepalive() == b": keepalive\n\n"
    assert stream_renderer("responses", model="m").keepalive() == b": keepalive\n\n"
    ping = stream_renderer("messages", model="m").keepalive()
    assert ping.startswith(b"event: ping\n")
    assert payloads(ping) == [{"type": "ping"}]


def test_messages_renderer_renumbers_blocks_in_opening_order() -> None:
    renderer = stream_renderer("messages", model="m")
    wire = renderer.render(StreamStart("msg_1", "up"))
    wire += renderer.render(BlockStart(4, "tool_call", "t1", "f"))
    wire += renderer.render(BlockDelta(4, "{}"))
    starts = [e for e in payloads(wire) if e["type"] == "content_block_start"]
    assert starts[0]["index"] == 0
    assert payloads(wire)[-1]["index"] == 0


def _responses_events(*frames: bytes) -> list[StreamEvent]:
    parser = ResponsesStreamParser()
    created = frame({"type": "response.created", "response": {"id": "r1", "model": "m"}})
    return [e for f in SSESplitter().feed(created + b"".join(frames)) for e in parser.feed(f)]


def test_responses_summary_parts_are_joined_and_signature_kept() -> None:
    item = {"type": "reasoning", "id": "rs_1", "summary": []}
    done_item = {**item, "encrypted_content": "enc"}
    events = _responses_events(
        frame({"type": "response.output_item.added", "output_index": 0, "item": item}),
        frame({"type": "response.reasoning_summary_part.added", "output_index": 0}),
        frame({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "A"}),
        frame({"type": "response.reasoning_summary_part.added", "output_index": 0}),
        frame({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "B"}),
        frame({"type": "response.output_item.done", "output_index": 0, "item": done_item}),
    )
    assert events[1:] == [
        BlockStart(0, "reasoning"),
        BlockDelta(0, "A"),
        BlockDelta(0, "\n\nB"),
        BlockStop(0, "enc"),
    ]


def test_responses_done_events_fill_in_when_deltas_were_skipped() -> None:
    message = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    call = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f", "arguments": ""}
    part = {"type": "output_text", "text": ""}
    where = {"output_index": 0, "content_index": 0}
    events = _responses_events(
        frame({"type": "response.output_item.added", "output_index": 0, "item": message}),
        frame({"type": "response.content_part.added", **where, "part": part}),
        frame({"type": "response.output_text.done", **where, "text": "whole"}),
        frame({"type": "response.content_part.done", **where, "part": part}),
        frame({"type": "response.output_item.added", "output_index": 1, "item": call}),
        frame(
            {
                "type": "response.output_item.done",
                "output_index": 1,
                "item": {**call, "arguments": "{}"},
            }
        ),
    )
    assert events[1:] == [
        BlockStart(0, "text"),
        BlockDelta(0, "whole"),
        BlockStop(0),
        BlockStart(1, "tool_call", "c1", "f"),
        BlockDelta(1, "{}"),
        BlockStop(1),
    ]


def test_responses_logprobs_kept_in_extras() -> None:
    parser = ResponsesStreamParser()
    frames = upstream("responses", SCENARIOS[0]).replace(b'"logprobs":[]', b'"logprobs":[{"t":1}]')
    for f in SSESplitter().feed(frames):
        parser.feed(f)
    assert parser.extras["logprobs"][:1] == [{"t": 1}]
    assert parser.extras["response"]["status"] == "completed"


def test_anthropic_blocks_without_canonical_kind_go_to_extras() -> None:
    parser = MessagesStreamParser()
    start = {"id": "msg_1", "model": "c", "usage": {"input_tokens": 3, "output_tokens": 1}}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    wire = (
        frame({"type": "message_start", "message": start})
        + frame({"type": "content_block_start", "index": 0, "content_block": redacted})
        + frame({"type": "content_block_stop", "index": 0})
        + frame({"type": "content_block_start", "index": 1, "content_block": {"type": "text"}})
        + frame(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "x"},
            }
        )
        + frame({"type": "content_block_stop", "index": 1})
        + frame(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "pause_turn"},
                "usage": {"output_tokens": 2},
            }
        )
        + frame({"type": "message_stop"})
    )
    events = [e for f in SSESplitter().feed(wire) for e in parser.feed(f)]
    assert events[1:] == [
        BlockStart(0, "text"),
        BlockDelta(0, "x"),
        BlockStop(0),
        StreamEnd(None, Usage(3, 2)),
    ]
    assert parser.extras == {"blocks": [redacted], "stop_reason": "pause_turn"}
