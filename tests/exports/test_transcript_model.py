"""The transcript builder on recorded shapes the gateway tests do not reach.

(Sessions made through the gateway with the official SDKs: tests/gateway/test_transcripts.py.)
"""

from __future__ import annotations

from typing import Any

from rolltap.events import Event
from rolltap.exports.transcript import build_transcript
from rolltap.exports.transcript_model import (
    Marker,
    ReasoningEntry,
    Said,
    ToolCallEntry,
    ToolResultEntry,
)
from rolltap.exports.transcript_text import render_lines

Recorded = tuple[str, dict[str, Any]]


def _events(*kinds_payloads: Recorded) -> list[Event]:
    return [Event(i, kind, 0.0, payload) for i, (kind, payload) in enumerate(kinds_payloads)]


def _request(
    iid: str, dialect: str, messages: list[Any], **extra: Any
) -> tuple[str, dict[str, Any]]:
    return ("model_request", {"intercept_id": iid, "dialect": dialect, "messages": messages,
                              "params": extra.pop("params", {}), **extra})  # fmt: skip


def _chat_answer(iid: str, message: dict[str, Any]) -> Recorded:
    body = {"choices": [{"message": message, "finish_reason": "stop"}]}
    return ("model_response", {"intercept_id": iid, "status": 200, "body": body,
                               "usage": {"prompt_tokens": 7, "completion_tokens": 4},
                               "finish_reason": "stop", "timing": {"total_ms": 391.2}})  # fmt: skip


def test_an_edited_echo_is_shown_an_unchanged_one_is_not() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    reply = {"role": "assistant", "content": "Let me see.", "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    unchanged = build_transcript(_events(
        _request("i1", "chat", [{"role": "user", "content": "q"}]),
        _chat_answer("i1", reply),
        # the harness sends the call back without its text, arguments re-serialized
        _request("i2", "chat", [{"role": "assistant", "content": None, "tool_calls": [
            {**call, "function": {"name": "f", "arguments": '{"x":1}'}}]}, result],
            prefix_messages=1),
    ))  # fmt: skip
    assert [type(e) for e in unchanged.entries if e.call == 1][1:] == [ToolResultEntry]
    assert unchanged.entries[-1] == ToolResultEntry("42", "c1", "f", seq=2, call=1)
    edited = build_transcript(_events(
        _request("i1", "chat", [{"role": "user", "content": "q"}]),
        _chat_answer("i1", reply),
        _request("i2", "chat", [{"role": "assistant", "content": "I made this up"}, result]),
    ))  # fmt: skip
    said = [e for e in edited.entries if isinstance(e, Said) and e.call == 1]
    assert said == [Said("assistant", "I made this up", 2, 1)]


def test_a_system_prompt_outside_the_messages_is_shown_when_it_changes() -> None:
    system = {"params": {"system": [{"type": "text", "text": "Be terse."}]}}
    t = build_transcript(_events(
        _request("i1", "messages", [{"role": "user", "content": "a"}], **system),
        _request("i2", "messages", [{"role": "user", "content": "b"}], **system),
        _request("i3", "responses", [{"role": "user", "content": "c"}],
                 params={"instructions": "Be kind."}),
    ))  # fmt: skip
    systems = [e.text for e in t.entries if isinstance(e, Said) and e.role == "system"]
    assert systems == ["Be terse.", "Be kind."]


def test_anthropic_and_responses_blocks() -> None:
    t = build_transcript(_events(
        _request("i1", "messages", [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "tool_use", "id": "t1", "name": "calc", "input": {"e": "1+1"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": [{"type": "text", "text": "2"}],
                                          "is_error": True}]}]),
        _request("i2", "responses", [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
            {"type": "function_call", "call_id": "f1", "name": "look", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "f1", "output": "found"},
            {"type": "web_search_call", "id": "w"}]),
    ))  # fmt: skip
    kept = [e for e in t.entries if e.kind != "request"]
    assert kept == [
        ReasoningEntry("hmm", seq=0, call=0), ReasoningEntry("", redacted=True, seq=0, call=0),
        ToolCallEntry("calc", '{"e":"1+1"}', "t1", 0, 0),
        ToolResultEntry("2", "t1", "calc", is_error=True, seq=0, call=0),
        ReasoningEntry("plan", seq=1, call=1), ToolCallEntry("look", "{}", "f1", 1, 1),
        ToolResultEntry("found", "f1", "look", seq=1, call=1),
        Marker("web_search_call", '{"type":"web_search_call","id":"w"}', 1, 1),
    ]  # fmt: skip
    text = "\n".join(render_lines(t))
    assert "reasoning: [redacted]" in text and "tool result calc [t1] (error): 2" in text


def test_token_client_and_legacy_answers_show_their_text() -> None:
    t = build_transcript(_events(
        ("model_response", {"intercept_id": "i1", "status": 200,
                            "body": {"choices": [{"text": " 6, 7,"}]}}),
        ("model_response", {"intercept_id": "i2", "status": 200, "body": {"content": " 8,"}}),
        ("model_response", {"status": 200, "message": {"content": " 9,"}}),
    ))  # fmt: skip
    assert [e.text for e in t.entries if isinstance(e, Said)] == [" 6, 7,", " 8,", " 9,"]
    assert len(t.calls) == 3  # answers without their request still make calls


def test_other_events_and_malformed_payloads_are_shown_as_stored() -> None:
    t = build_transcript(_events(
        ("model_request", {"intercept_id": "i1", "messages": "not a list"}),
        ("harness_output", {"stream": "stderr", "text": "warning"}),
        ("reward", {"reward": 0.5}),
        ("status", {"status": "limit_reached", "error": None, "limit": "max_turns"}),
        ("custom", {"a": 1}),
        ("token_count", {"status": 200, "input_tokens": 12, "source": "estimate"}),
        ("token_count", {"status": 502, "error": {"code": "upstream_unreachable",
                                                   "message": "refused"}}),
        ("status", {"status": "error", "error": "upstream_unreachable", "limit": None}),
    ))  # fmt: skip
    lines = render_lines(t)
    assert lines[0].startswith("   0 model_request {")
    assert [line.strip() for line in lines[1:]] == [
        "1 stderr> warning", "2 reward 0.5", "3 status limit_reached (max_turns)",
        '4 custom {"a":1}', "5 token_count 12 input tokens (estimate)",
        "6 token_count 502 [upstream_unreachable] refused", "7 status error (upstream_unreachable)",
    ]  # fmt: skip
