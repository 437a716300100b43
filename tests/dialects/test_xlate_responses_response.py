"""OpenAI Responses responses <-> canonical: output items, statuses, usage."""

from __future__ import annotations

import copy
from typing import Any

import openai.types.responses
import orjson
import pytest

from rolltap.dialects.canonical import (
    Reasoning,
    Text,
    ToolCall,
    Usage,
)
from rolltap.dialects.chat import dialect as chat
from rolltap.dialects.messages import dialect as messages
from rolltap.dialects.responses import dialect as responses
from rolltap.errors import InvalidRequestError, UpstreamProtocolError

RESPONSE: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "model": "gpt-5",
    "output": [
        {
            "type": "reasoning",
            "id": "rs_9",
            "summary": [{"type": "summary_text", "text": "Look it up."}],
        },
        {
            "type": "message",
            "id": "msg_9",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_9",
            "call_id": "call_9",
            "name": "search",
            "arguments": '{"q":"x"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 300,
        "input_tokens_details": {"cached_tokens": 256, "cache_write_tokens": 0},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 30},
        "total_tokens": 350,
    },
    "reasoning": {"effort": "medium", "summary": "auto"},
}


def test_response_maps_and_renders_back() -> None:
    resp = responses.response_to_canonical(copy.deepcopy(RESPONSE))
    assert resp.parts == (
        Reasoning("Look it up.", extra={"id": "rs_9"}),
        Text("Checking.", {"item": {"id": "msg_9"}}),
        ToolCall("call_9", "search", '{"q":"x"}', {"id": "fc_9"}),
    )
    assert resp.stop_reason == "tool_use"  # completed, with a function call
    assert resp.usage == Usage(300, 50, 256, 30)
    assert resp.extra == {
        "created_at": 1741476542,
        "error": None,
        "reasoning": {"effort": "medium", "summary": "auto"},
    }
    body = responses.response_from_canonical(resp)
    assert body == RESPONSE
    openai.types.responses.Response.model_validate(body)
    as_messages = messages.response_from_canonical(resp)
    assert [b["type"] for b in as_messages["content"]] == ["thinking", "text", "tool_use"]
    assert as_messages["stop_reason"] == "tool_use"


@pytest.mark.parametrize(
    ("status", "details", "stop"),
    [
        ("incomplete", {"reason": "max_output_tokens"}, "max_tokens"),
        ("incomplete", {"reason": "content_filter"}, "content_filter"),
        ("failed", None, None),
        ("completed", None, "end_turn"),
    ],
)
def test_statuses(status: str, details: Any, stop: str | None) -> None:
    body = {"id": "r", "model": "m", "status": status, "incomplete_details": details, "output": []}
    resp = responses.response_to_canonical(body)
    assert resp.stop_reason == stop
    out = responses.response_from_canonical(resp)
    assert (out["status"], out["incomplete_details"]) == (status, details)
    openai.types.responses.Response.model_validate(out)


def test_chat_response_in_responses() -> None:
    upstream = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "partial", "reasoning_content": "hm"},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14},
    }
    out = responses.response_from_canonical(chat.response_to_canonical(upstream))
    assert (out["status"], out["incomplete_details"]) == (
        "incomplete",
        {"reason": "max_output_tokens"},
    )
    assert [i["type"] for i in out["output"]] == ["reasoning", "message"]
    assert out["output"][0]["summary"] == [{"type": "summary_text", "text": "hm"}]
    openai.types.responses.Response.model_validate(out)


def test_error_body_and_upstream_detail() -> None:
    err = InvalidRequestError("must be a string", field="input[0].content")
    assert orjson.loads(responses.error_body(err)) == {
        "error": {
            "message": "input[0].content: must be a string",
            "type": "invalid_request_error",
            "code": "invalid_request",
            "param": "input[0].content",
        }
    }
    assert responses.upstream_error_detail(
        b'{"error": {"message": "x", "type": "server_error"}}'
    ) == {"message": "x", "type": "server_error"}
    assert responses.upstream_error_detail(b"nope") is None


def test_hosted_tool_output_is_a_protocol_error() -> None:
    body = copy.deepcopy(RESPONSE)
    body["output"].append({"type": "web_search_call", "id": "ws_1", "status": "completed"})
    with pytest.raises(UpstreamProtocolError, match=r"output\[3\]\.type"):
        responses.response_to_canonical(body)
