"""The transcript's tolerant reading of recorded bodies: never an error, the rest shown.

A stored body may be cut short, refused by the gateway, in a dialect this version does
not know, or off its schema; what does not parse is shown as stored (a ``Marker`` with
its JSON), the messages beside it as usual.
"""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.dialects.canonical import Text, ToolCall
from rolltap.events import Event
from rolltap.exports import build_transcript, render_lines
from rolltap.exports.recorded import read_message, read_system
from rolltap.exports.transcript_model import CallError, Marker, Said, ToolResultEntry


def _request(dialect: str, messages: list[Any], **params: Any) -> Event:
    payload = {"intercept_id": "i1", "dialect": dialect, "messages": messages, "params": params}
    return Event(0, "model_request", 0.0, payload)


def _response(body: Any) -> Event:
    payload = {"intercept_id": "i1", "status": 200, "body": body, "finish_reason": "length"}
    return Event(1, "model_response", 0.0, payload)


def test_a_truncated_answer_is_shown_as_stored() -> None:
    # a stream cut short: the tool call's name arrived, its id and arguments did not
    cut = {"role": "assistant", "content": "Let me", "tool_calls": [{"function": {"name": "f"}}]}
    t = build_transcript([
        _request("chat", [{"role": "user", "content": "go"}]),
        _response({"choices": [{"message": cut}]}),
    ])  # fmt: skip
    assert [e.kind for e in t.entries] == ["request", "said", "reply", "marker"]
    assert t.entries[-1] == Marker("message", orjson.dumps(cut).decode(), 1, 0)
    assert t.calls[0].status == 200
    assert any("Let me" in line for line in render_lines(t))


def test_a_truncated_anthropic_answer_keeps_its_whole_blocks() -> None:
    body = {"content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "t"}]}
    t = build_transcript([_request("messages", [{"role": "user", "content": "go"}]),
                          _response(body)])  # fmt: skip
    said, cut = t.entries[-2:]
    assert said == Said("assistant", "Checking.", 1, 0)
    assert cut == Marker("tool_use", '{"type":"tool_use","id":"t"}', 1, 0)


def test_a_body_that_is_no_object_is_no_output() -> None:
    t = build_transcript([_request("chat", []), _response('{"choices": [{"mess')])
    assert [e.kind for e in t.entries] == ["request", "reply"]


def test_a_refused_call_shows_what_parses_and_the_rest_raw() -> None:
    # the gateway refused this body (a role chat does not have) and recorded it as sent
    odd = {"role": "wizard", "content": "abracadabra"}
    refused = Event(
        1,
        "model_error",
        0.0,
        {
            "intercept_id": "i1",
            "code": "invalid_request",
            "status": 400,
            "message": "messages[1].role",
        },
    )
    t = build_transcript([
        _request("chat", [{"role": "user", "content": "hi"}, odd, {"role": "tool"}]), refused,
    ])  # fmt: skip
    assert t.entries[1:] == (
        Said("user", "hi", 0, 0),
        Marker("message", orjson.dumps(odd).decode(), 0, 0),
        Marker("message", '{"role":"tool"}', 0, 0),
        CallError("invalid_request", "messages[1].role", 400, 1, 0),
    )
    assert t.calls[0].error_code == "invalid_request"


def test_a_request_in_an_unknown_dialect_is_shown_raw() -> None:
    message = {"role": "user", "content": "hi"}
    t = build_transcript([_request("gopher", [message], system="be brief")])
    assert t.entries[1:] == (Marker("message", '{"role":"user","content":"hi"}', 0, 0),)
    assert t.calls[0].dialect == "gopher"
    assert read_message("gopher", message) is None
    assert read_system("gopher", "be brief") == ()


def test_a_system_prompt_off_its_schema_is_shown_raw() -> None:
    t = build_transcript([_request("messages", [], system=[{"type": "image"}])])
    assert t.entries[1:] == (Marker("system", '[{"type":"image"}]', 0, 0),)
    assert read_system("messages", [{"type": "text", "text": "a"}]) == (Text("a"),)


def test_each_recorded_message_is_read_by_its_dialects_parser() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    parsed = read_message("responses", call)
    assert parsed is not None
    assert parsed.messages[0].parts == (ToolCall("c1", "f", "{}"),)
    output = {"type": "function_call_output", "call_id": "c1", "output": "42"}
    t = build_transcript([_request("responses", [call, output])])
    assert t.entries[-1] == ToolResultEntry("42", "c1", "f", seq=0, call=0)
    shapes: list[Any] = [None, 3, "text", [], {"role": None}, {"content": {"deep": [1]}}]
    for shape in shapes:
        for dialect in ("chat", "messages", "responses", None, "gopher"):
            read_message(dialect, shape)  # never raises
            build_transcript([_request(dialect or "chat", [shape])])
