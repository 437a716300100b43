"""OpenAI Responses <-> canonical: realistic bodies, mappings, errors."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    Text,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.dialects.chat import dialect as chat
from rolltap.dialects.responses import dialect as responses
from rolltap.errors import InvalidRequestError

# a coding agent's stateless request (store off, reasoning passed back encrypted)
AGENT_BODY: dict[str, Any] = {
    "model": "gpt-5-codex",
    "instructions": "You are a coding agent.",
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Sandbox: read-only."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "List the files."},
                {
                    "type": "input_image",
                    "image_url": "https://img.test/screen.png",
                    "detail": "high",
                },
            ],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB..."},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "shell",
            "arguments": '{"command":["ls"]}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Two files.", "annotations": []}],
        },
        {"type": "message", "role": "user", "content": "Thanks"},
    ],
    "tools": [
        {
            "type": "function",
            "name": "shell",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "array"}}},
            "strict": False,
        },
        {"type": "web_search"},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "max_output_tokens": 4000,
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "rollout-5",
    "reasoning": {"effort": "medium", "summary": "auto"},
    "stream": True,
}


def test_agent_body_maps_field_by_field() -> None:
    req = responses.to_canonical(copy.deepcopy(AGENT_BODY))
    assert req.system == (
        Text("You are a coding agent."),
        Text("Sandbox: read-only.", {"role": "developer"}),
    )
    user, assistant, tool, answer, last = req.messages
    assert user.parts == (
        Text("List the files."),
        Image("url", "https://img.test/screen.png", extra={"detail": "high"}),
    )
    assert assistant.parts == (
        Reasoning("", "gAAAAB...", {"id": "rs_1"}),
        ToolCall("call_1", "shell", '{"command":["ls"]}', {"id": "fc_1", "status": "completed"}),
    )
    assert tool == Message("tool", (ToolResult("call_1", (Text("a.py\nb.py"),)),))
    assert answer.parts == (Text("Two files.", {"item": {"id": "msg_1", "status": "completed"}}),)
    assert last == Message("user", (Text("Thanks"),))
    assert req.tools[0].extra == {}  # strict: false is canonical's default
    assert req.tool_choice == ToolChoice("auto", None, False)
    assert req.max_tokens == 4000
    assert req.extra["tools"] == [{"type": "web_search"}]
    assert set(req.extra) == {"tools", "store", "include", "prompt_cache_key", "reasoning"}


def test_agent_body_renders_back_as_sent() -> None:
    body = responses.from_canonical(responses.to_canonical(copy.deepcopy(AGENT_BODY)))
    want = copy.deepcopy(AGENT_BODY)
    want["input"][0]["content"] = "Sandbox: read-only."  # one plain text: the string form
    assert body == want
    assert responses.validate_request(orjson.dumps(body)) == body


def test_agent_body_in_chat() -> None:
    body = copy.deepcopy(AGENT_BODY)
    with pytest.raises(InvalidRequestError) as info:  # under "refuse"
        chat.from_canonical(responses.to_canonical(body))
    assert info.value.field == "tools[type=web_search]"  # the hosted web search
    body["tools"].pop()
    out = chat.from_canonical(
        responses.to_canonical(body)
    )  # store, include, cache key, ids, reasoning.summary: dropped
    assert [m["role"] for m in out["messages"]] == [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert out["messages"][3] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"command":["ls"]}'},
            }
        ],
    }  # the encrypted reasoning has nothing to say in chat
    assert out["messages"][2]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://img.test/screen.png", "detail": "high"},
    }
    assert (out["max_tokens"], out["parallel_tool_calls"]) == (4000, False)
    assert out["reasoning_effort"] == "medium"


def test_reasoning_text_and_defaults() -> None:
    gpt_oss = {
        "type": "reasoning",
        "id": "rs_2",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "think"}],
    }
    multi = {
        "type": "reasoning",
        "id": "rs_3",
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
    }
    body = {"input": [{"role": "user", "content": "q"}, gpt_oss, multi]}
    req = responses.to_canonical(copy.deepcopy(body))
    assert [p.text for p in req.messages[1].parts if isinstance(p, Reasoning)] == [
        "think",
        "a\n\nb",
    ]
    rendered = responses.from_canonical(req)
    assert rendered["input"][1:] == body["input"][1:]
    with pytest.raises(InvalidRequestError) as info:  # chat has one reasoning slot per message
        chat.from_canonical(req)
    assert info.value.field == "messages[1].parts[1]"
    strict = responses.to_canonical(
        {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": None}]}
    )
    assert strict.tools[0].extra == {"strict": True}  # Responses functions are strict by default
    assert chat.from_canonical(strict)["tools"][0]["function"]["strict"] is True


def test_chat_request_in_responses() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "calling",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "max_tokens": 9,
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    out = responses.from_canonical(chat.to_canonical(body))
    assert out == {
        "instructions": "sys",
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "calling", "annotations": []}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
        "max_output_tokens": 9,
        "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": False}],
    }


@pytest.mark.parametrize(
    ("req", "field"),
    [
        (Request(messages=(), stop=("x",)), "stop"),
        (Request(messages=(), seed=3), "seed"),
        (Request(messages=(), top_k=3), "top_k"),
    ],
)
def test_fields_responses_lacks(req: Request, field: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        responses.from_canonical(req)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b["input"][3].pop("call_id"), "input[3].call_id"),
        (lambda b: b["input"][1].update(role="tool"), "input[1].role"),
        (
            lambda b: b["input"][1]["content"].append({"type": "input_text"}),
            "input[1].content[2].text",
        ),
        (lambda b: b.update(input=3), "input"),
        (lambda b: b.update(max_output_tokens="9"), "max_output_tokens"),
        (lambda b: b["tools"][0].pop("name"), "tools[0].name"),
    ],
)
def test_errors_name_the_field(mutate: Any, field: str) -> None:
    body = copy.deepcopy(AGENT_BODY)
    mutate(body)
    with pytest.raises(InvalidRequestError) as info:
        responses.validate_request(orjson.dumps(body))
    assert info.value.field == field


def test_items_with_no_canonical_form() -> None:
    body = copy.deepcopy(AGENT_BODY)
    body["input"].insert(2, {"type": "item_reference", "id": "msg_0"})
    body["input"][1]["content"].append({"type": "input_file", "file_id": "file-1"})
    assert responses.validate_request(orjson.dumps(body)) == body
    with pytest.raises(InvalidRequestError) as info:
        responses.to_canonical(body)
    assert info.value.field == "input[1].content[2].type"


def test_refusal_text_crosses_as_text() -> None:
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    body = {
        "input": [
            {"role": "user", "content": "do it"},
            {"type": "message", "role": "assistant", "content": [refusal]},
        ]
    }
    req = responses.to_canonical(copy.deepcopy(body))
    assert req.messages[1].parts == (Text("I can't help with that.", {"type": "refusal"}),)
    assert responses.from_canonical(req)["input"][1]["content"] == [refusal]
    assert chat.from_canonical(req)["messages"][1]["content"] == "I can't help with that."
