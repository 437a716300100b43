"""Anthropic Messages responses <-> canonical: blocks, usage, stop reasons."""

from __future__ import annotations

import copy
from typing import Any

import anthropic.types
import pytest

from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    Text,
    Tool,
    ToolCall,
)
from rolltap.dialects.chat import dialect as chat
from rolltap.dialects.messages import dialect as messages
from rolltap.errors import UpstreamProtocolError

RESPONSE: dict[str, Any] = {
    "id": "msg_01XY",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Need the file.", "signature": "sig=="},
        {"type": "text", "text": "Reading it.", "citations": None},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"path": "a.py"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2000,
        "output_tokens": 80,
        "service_tier": "standard",
    },
}


def test_response_maps_and_renders_back() -> None:
    resp = messages.response_to_canonical(copy.deepcopy(RESPONSE))
    assert resp.parts == (
        Reasoning("Need the file.", "sig=="),
        Text("Reading it.", {"citations": None}),
        ToolCall("toolu_9", "read", '{"path":"a.py"}'),
    )
    assert resp.stop_reason == "tool_use"
    # canonical input counts the whole prompt: uncached + cache reads + cache writes
    assert (resp.usage.input_tokens, resp.usage.cache_read_tokens, resp.usage.output_tokens) == (
        2112,
        2000,
        80,
    )
    body = messages.response_from_canonical(resp)
    assert body == RESPONSE
    anthropic.types.Message.model_validate(body)
    as_chat = chat.response_from_canonical(resp)
    assert as_chat["usage"] == {
        "prompt_tokens": 2112,
        "completion_tokens": 80,
        "total_tokens": 2192,
        "prompt_tokens_details": {"cached_tokens": 2000},
    }
    assert as_chat["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("native", "canonical"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("tool_use", "tool_use"),
        ("refusal", "content_filter"),
        ("pause_turn", None),
    ],
)
def test_stop_reasons(native: str, canonical: str | None) -> None:
    body = {**copy.deepcopy(RESPONSE), "stop_reason": native}
    resp = messages.response_to_canonical(body)
    assert resp.stop_reason == canonical
    assert messages.response_from_canonical(resp)["stop_reason"] == native


def test_chat_tool_call_with_bad_arguments_cannot_become_a_messages_response() -> None:
    upstream = {
        "id": "c",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"x": '},
                        }
                    ],
                },
            }
        ],
    }
    with pytest.raises(UpstreamProtocolError, match="arguments"):
        messages.response_from_canonical(chat.response_to_canonical(upstream))


def test_estimate_tokens() -> None:
    req = Request(
        system=(Text("x" * 10),),
        messages=(
            Message("user", (Text("y" * 7), Image("url", "https://i"))),
            Message("assistant", (ToolCall("id", "ab", "{}"),)),
        ),
        tools=(Tool("t", "d", {}),),
    )
    chars = 10 + 7 + (2 + 2) + (1 + 1 + 2)
    expected = -(-chars // 4) + 2 * messages.TOKENS_PER_MESSAGE + messages.TOKENS_PER_IMAGE
    assert messages.estimate_tokens(req) == expected


def test_server_tool_blocks_are_a_protocol_error() -> None:
    body = copy.deepcopy(RESPONSE)
    body["content"].insert(
        0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
    )
    with pytest.raises(UpstreamProtocolError, match=r"content\[0\]\.type"):
        messages.response_to_canonical(body)
