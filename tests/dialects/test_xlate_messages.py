"""Anthropic Messages <-> canonical: realistic bodies, mappings, errors, token estimates."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.dialects.chat import dialect as chat
from rolltap.dialects.messages import dialect as messages
from rolltap.errors import InvalidRequestError

CACHE = {"type": "ephemeral"}

# a coding agent's request mid tool loop, as the Anthropic SDK sends it
AGENT_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8192,
    "system": [{"type": "text", "text": "You are a coding agent.", "cache_control": CACHE}],
    "messages": [
        {"role": "user", "content": "Fix the failing test."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Run the tests first.",
                    "signature": "EqQBCkYIBxgC",
                },
                {"type": "text", "text": "Running the tests."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "bash",
                    "input": {"command": "pytest -x"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_02",
                    "name": "read",
                    "input": {"path": "a.py", "lines": [1, 20]},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "1 failed",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": [
                        {"type": "text", "text": "def f(): ..."},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                        },
                    ],
                    "cache_control": CACHE,
                },
                {"type": "text", "text": "Keep going."},
            ],
        },
    ],
    "tools": [
        {
            "name": "bash",
            "description": "Run a command.",
            "input_schema": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
        {"name": "read", "input_schema": {"type": "object"}, "cache_control": CACHE},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
    "metadata": {"user_id": "rollout-3"},
    "stop_sequences": ["</done>"],
    "temperature": 1.0,
    "top_k": 40,
    "stream": True,
    "thinking": {"type": "enabled", "budget_tokens": 4096},
}


def test_agent_body_maps_field_by_field() -> None:
    req = messages.to_canonical(copy.deepcopy(AGENT_BODY))
    assert req.system == (Text("You are a coding agent.", {"cache_control": CACHE}),)
    user, assistant, tool, later = req.messages
    assert user == Message("user", (Text("Fix the failing test."),))
    assert assistant.parts == (
        Reasoning("Run the tests first.", "EqQBCkYIBxgC"),
        Text("Running the tests."),
        ToolCall("toolu_01", "bash", '{"command":"pytest -x"}'),
        ToolCall("toolu_02", "read", '{"path":"a.py","lines":[1,20]}'),
    )
    assert tool.parts == (
        ToolResult("toolu_01", (Text("1 failed"),), is_error=True),
        ToolResult(
            "toolu_02",
            (Text("def f(): ..."), Image("base64", "iVBO", "image/png")),
            extra={"cache_control": CACHE},
        ),
    )
    assert later == Message("user", (Text("Keep going."),))
    assert req.tools[1] == Tool("read", None, {"type": "object"}, {"cache_control": CACHE})
    assert req.tool_choice == ToolChoice("auto", None, True)
    assert (req.max_tokens, req.user, req.stop, req.top_k, req.stream) == (
        8192,
        "rollout-3",
        ("</done>",),
        40,
        True,
    )
    assert req.extra == {"thinking": {"type": "enabled", "budget_tokens": 4096}}
    assert req.origin == "messages"


def test_agent_body_renders_back_as_sent() -> None:
    body = messages.from_canonical(messages.to_canonical(copy.deepcopy(AGENT_BODY)))
    assert body == AGENT_BODY
    assert messages.validate_request(orjson.dumps(body)) == body


def test_agent_body_in_chat() -> None:
    body = copy.deepcopy(AGENT_BODY)
    with pytest.raises(InvalidRequestError) as info:  # under "refuse"
        chat.from_canonical(messages.to_canonical(body))
    assert info.value.field == "messages[2].parts[1].content[1]"  # chat's results: text only
    body["messages"][2]["content"][1]["content"].pop()
    out = chat.from_canonical(messages.to_canonical(body))
    assert out["reasoning_effort"] == "medium"  # the thinking budget of 4096 tokens
    assert out["messages"][0] == {"role": "system", "content": "You are a coding agent."}
    assert out["messages"][2] == {
        "role": "assistant",
        "reasoning_content": "Run the tests first.",
        "content": "Running the tests.",
        "tool_calls": [
            {
                "id": "toolu_01",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command":"pytest -x"}'},
            },
            {
                "id": "toolu_02",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path":"a.py","lines":[1,20]}'},
            },
        ],
    }
    assert out["messages"][3:] == [
        {"role": "tool", "tool_call_id": "toolu_01", "content": "1 failed"},
        {"role": "tool", "tool_call_id": "toolu_02", "content": "def f(): ..."},
        {"role": "user", "content": "Keep going."},
    ]
    assert (out["user"], out["stop"], out["top_k"], out["max_tokens"]) == (
        "rollout-3",
        ["</done>"],
        40,
        8192,
    )
    assert (out["tool_choice"], out["parallel_tool_calls"]) == ("auto", True)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("max_tokens"), "max_tokens"),
        (lambda b: b.update(max_tokens=0), "max_tokens"),
        (lambda b: b.update(messages=[]), "messages"),
        # a system entry is valid (Anthropic's mid-conversation system beta); tool is not
        (lambda b: b["messages"][0].update(role="tool"), "messages[0].role"),
        (
            lambda b: b["messages"][1]["content"].append({"text": "x"}),
            "messages[1].content[4].type",
        ),
        (
            lambda b: b["messages"][1]["content"][2].update(input="pytest"),
            "messages[1].content[2].input",
        ),
        (
            lambda b: b["messages"][2]["content"][0].pop("tool_use_id"),
            "messages[2].content[0].tool_use_id",
        ),
        (
            lambda b: b["messages"][2]["content"][1]["content"][1]["source"].pop("media_type"),
            "messages[2].content[1].content[1].source.media_type",
        ),
        (lambda b: b["tools"][0].pop("input_schema"), "tools[0].input_schema"),
        (
            lambda b: b.update(system=[{"type": "image", "source": {"type": "url", "url": "u"}}]),
            "system[0].type",
        ),
    ],
)
def test_errors_name_the_field(mutate: Any, field: str) -> None:
    body = copy.deepcopy(AGENT_BODY)
    mutate(body)
    with pytest.raises(InvalidRequestError) as info:
        messages.validate_request(orjson.dumps(body))
    assert info.value.field == field


def test_blocks_with_no_canonical_form() -> None:
    body = copy.deepcopy(AGENT_BODY)
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "x"},
    }
    body["messages"][2]["content"].insert(0, document)
    assert messages.validate_request(orjson.dumps(body)) == body  # valid Anthropic
    with pytest.raises(InvalidRequestError) as info:
        messages.to_canonical(body)
    assert info.value.field == "messages[2].content[0].type"


def test_server_tools_and_redacted_thinking_stay_in_their_dialect() -> None:
    body = copy.deepcopy(AGENT_BODY)
    body["tools"].append({"type": "web_search_20250305", "name": "web_search", "max_uses": 3})
    body["messages"][1]["content"].insert(0, {"type": "redacted_thinking", "data": "opaque"})
    req = messages.to_canonical(body)
    assert req.messages[1].parts[0] == Reasoning("", "opaque", {"type": "redacted_thinking"})
    assert messages.from_canonical(req) == body
    del body["thinking"]
    with pytest.raises(InvalidRequestError) as info:
        chat.from_canonical(messages.to_canonical(body))
    assert info.value.field == "tools[type=web_search_20250305]"
    body["tools"].pop()
    body["messages"][2]["content"][1]["content"].pop()
    out = chat.from_canonical(messages.to_canonical(body))
    assert (
        out["messages"][2]["reasoning_content"] == "Run the tests first."
    )  # redacted block left out
