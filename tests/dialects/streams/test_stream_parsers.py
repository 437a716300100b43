"""The parsers on their own: canonical events, malformed input, upstream errors, extras."""

from __future__ import annotations

import pytest

from dialects.streams.streamkit import SCENARIOS, Scenario, frame, upstream
from rolltap.dialects.canonical import (
    BlockDelta,
    BlockStart,
    BlockStop,
    StreamEnd,
    StreamEvent,
    StreamStart,
    Usage,
)
from rolltap.dialects.sse import SSEEvent, SSESplitter
from rolltap.dialects.streams import (
    DIALECTS,
    ChatStreamParser,
    StreamParser,
    UpstreamStreamError,
    stream_parser,
    stream_renderer,
)
from rolltap.errors import ConfigError, UpstreamProtocolError


def parse_all(parser: StreamParser, wire: bytes) -> list[StreamEvent]:
    return [e for sse in SSESplitter().feed(wire) for e in parser.feed(sse)]


def sse(data: bytes, event: bytes | None = None) -> SSEEvent:
    return SSEEvent(raw=b"", data=data, event=event)


def test_chat_parser_opens_and_closes_implied_blocks() -> None:
    scenario = next(s for s in SCENARIOS if s.name == "parallel_tools")
    events = parse_all(ChatStreamParser(), upstream("chat", scenario))
    assert events == [
        StreamStart("chatcmpl-up1", "upstream-model"),
        BlockStart(0, "tool_call", "call_a", "add"),
        BlockDelta(0, '{"a": '),
        BlockStart(1, "tool_call", "call_b", "lookup"),
        BlockDelta(1, '{"keys": ['),
        BlockDelta(0, "1, "),
        BlockDelta(1, '"x", "y"'),
        BlockDelta(0, '"b": 2}'),
        BlockDelta(1, "]}"),
        BlockStop(0),
        BlockStop(1),
        StreamEnd("tool_use", Usage(55, 30)),
    ]


def test_chat_stream_end_waits_for_the_usage_chunk() -> None:
    parser = ChatStreamParser()
    scenario = next(s for s in SCENARIOS if s.name == "text")
    frames = SSESplitter().feed(upstream("chat", scenario))
    before_done = [e for f in frames[:-1] for e in parser.feed(f)]
    assert not any(isinstance(e, StreamEnd) for e in before_done)
    assert not parser.done
    assert parser.feed(frames[-1]) == [StreamEnd("end_turn", Usage(12, 5))]
    assert parser.done


def test_chat_parser_keeps_logprobs_and_token_ids() -> None:
    parser = ChatStreamParser()
    scenario = next(s for s in SCENARIOS if s.name == "text")
    parse_all(parser, upstream("chat", scenario))
    assert [entry["token"] for entry in parser.extras["logprobs"]] == [
        "Hello",
        ", wor",
        'ld! "quoted" \\ ✓',
    ]
    assert parser.extras["token_ids"] == [5, 5, 16]


def test_chat_parser_reads_vllm_stop_string() -> None:
    chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "x"}}]}
    finish = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": "END"}],
    }
    wire = frame(chunk) + frame(finish) + b"data: [DONE]\n\n"
    events = parse_all(ChatStreamParser(), wire)
    assert events[-1] == StreamEnd("stop_sequence", Usage(), "END")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_same_dialect_round_trip_is_lossless(dialect: str, scenario: Scenario) -> None:
    """Parsing what the renderer wrote gives back the events it was given."""
    first = parse_all(stream_parser(dialect), upstream(dialect, scenario))
    renderer = stream_renderer(dialect, model="upstream", include_usage=True)
    rendered = b"".join(renderer.render(e) for e in first)
    again = parse_all(stream_parser(dialect), rendered)
    assert [e for e in again if not isinstance(e, StreamStart)] == [
        e for e in first if not isinstance(e, StreamStart)
    ]


MALFORMED: list[tuple[str, list[bytes]]] = [
    ("chat", [b"data: {not json\n\n"]),
    ("chat", [b"data: [1, 2]\n\n"]),
    (
        "chat",
        [frame({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0}]}}]})],
    ),
    ("chat", [frame({"id": "c", "choices": "nope"})]),
    ("chat", [b"data: [DONE]\n\n"]),
    ("messages", [b"event: message_start\ndata: {\n\n"]),
    (
        "messages",
        [
            frame(
                {
                    "type": "content_block_delta",
                    "index": 3,
                    "delta": {"type": "text_delta", "text": "x"},
                }
            )
        ],
    ),
    ("messages", [frame({"type": "message_start", "message": {"model": "m"}})]),
    ("messages", [frame({"type": "content_block_start", "index": "0", "content_block": {}})]),
    ("responses", [b"data: nope\n\n"]),
    (
        "responses",
        [
            frame(
                {
                    "type": "response.output_text.delta",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "x",
                }
            )
        ],
    ),
    ("responses", [frame({"type": "response.created", "response": {"model": "m"}})]),
    (
        "responses",
        [
            frame(
                {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{"}
            )
        ],
    ),
]


@pytest.mark.parametrize(("dialect", "frames"), MALFORMED)
def test_malformed_upstream_events_raise(dialect: str, frames: list[bytes]) -> None:
    parser = stream_parser(dialect)
    with pytest.raises(UpstreamProtocolError):
        parse_all(parser, b"".join(frames))


UPSTREAM_ERRORS: list[tuple[str, bytes, str]] = [
    (
        "chat",
        frame({"error": {"message": "model crashed", "type": "server_error"}}),
        "model crashed",
    ),
    (
        "messages",
        frame(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        ),
        "Overloaded",
    ),
    (
        "responses",
        frame(
            {
                "type": "response.failed",
                "sequence_number": 3,
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "error": {"code": "server_error", "message": "it broke"},
                },
            }
        ),
        "it broke",
    ),
    (
        "responses",
        frame(
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None}
        ),
        "slow down",
    ),
]


@pytest.mark.parametrize(("dialect", "wire", "message"), UPSTREAM_ERRORS)
def test_upstream_error_events_raise_with_their_message(
    dialect: str, wire: bytes, message: str
) -> None:
    with pytest.raises(UpstreamStreamError, match=message) as caught:
        parse_all(stream_parser(dialect), wire)
    assert isinstance(caught.value, UpstreamProtocolError)
    assert caught.value.upstream_error["message"] == message


def test_anthropic_error_type_survives_to_an_anthropic_harness() -> None:
    wire = frame(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"
    )
    with pytest.raises(UpstreamStreamError) as caught:
        parse_all(stream_parser("messages"), wire)
    rendered = stream_renderer("messages", model="m").error(caught.value)
    assert b'"type":"overloaded_error"' in rendered


@pytest.mark.parametrize("dialect", DIALECTS)
def test_eof_before_the_end_is_an_error(dialect: str) -> None:
    scenario = SCENARIOS[0]
    frames = SSESplitter().feed(upstream(dialect, scenario))
    parser = stream_parser(dialect)
    for f in frames[:-1]:
        parser.feed(f)
    if dialect != "chat":
        with pytest.raises(UpstreamProtocolError):
            parser.eof()
    else:  # chat: finish_reason and usage seen, only [DONE] missing
        assert parser.eof() == [StreamEnd("end_turn", Usage(12, 5))]
    fresh = stream_parser(dialect)
    fresh.feed(frames[0])
    with pytest.raises(UpstreamProtocolError):
        fresh.eof()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_events_after_the_end_are_an_error(dialect: str) -> None:
    parser = stream_parser(dialect)
    parse_all(parser, upstream(dialect, SCENARIOS[0]))
    assert parser.done
    assert parser.eof() == []
    with pytest.raises(UpstreamProtocolError):
        parser.feed(sse(b"{}"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_comments_and_pings_are_ignored(dialect: str) -> None:
    parser = stream_parser(dialect)
    assert parser.feed(SSEEvent(raw=b": keepalive\n\n", data=None, event=None)) == []
    assert stream_parser("messages").feed(sse(b'{"type": "ping"}', b"ping")) == []


def test_unknown_dialects_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown stream dialect"):
        stream_parser("completions")
    with pytest.raises(ConfigError, match="unknown stream dialect"):
        stream_renderer("gemini", model="m")
