"""Chat completions <-> canonical: realistic bodies, every mapping, errors naming fields."""

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
    ToolCall,
    ToolChoice,
    ToolResult,
)
from rolltap.dialects.chat import dialect as chat
from rolltap.dialects.messages import dialect as messages
from rolltap.dialects.responses import dialect as responses
from rolltap.errors import InvalidRequestError

PNG = "iVBORw0KGgo="

# what an OpenAI-SDK agent loop sends on its third turn (assistant messages echoed back
# as the SDK dumps them, vLLM extension fields included)
AGENT_BODY: dict[str, Any] = {
    "model": "qwen3-8b",
    "messages": [
        {"role": "system", "content": "You are a careful assistant."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image, and what is 2+2?"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "reasoning_content": "I should call both tools.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "describe", "arguments": '{"url": "x"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "tool", "tool_call_id": "call_2", "content": "4"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "describe",
                "description": "Describe an image.",
                "parameters": {"type": "object", "properties": {"url": {"type": "string"}}},
            },
        },
        {
            "type": "function",
            "function": {"name": "add", "parameters": {"type": "object"}, "strict": True},
        },
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "max_completion_tokens": 512,
    "temperature": 0.6,
    "top_p": 0.95,
    "top_k": 20,
    "stop": ["</answer>"],
    "seed": 7,
    "user": "rollout-17",
    "stream": True,
    "stream_options": {"include_usage": True},
    "n": 1,
    "logprobs": True,
    "chat_template_kwargs": {"enable_thinking": True},
}


def test_agent_body_maps_field_by_field() -> None:
    req = chat.to_canonical(copy.deepcopy(AGENT_BODY))
    assert req.system == (Text("You are a careful assistant."),)
    user, assistant, tool = req.messages
    assert user.parts == (
        Text("What is in this image, and what is 2+2?"),
        Image("base64", PNG, "image/png", {"detail": "low"}),
    )
    assert assistant.parts == (
        Reasoning("I should call both tools."),
        ToolCall("call_1", "describe", '{"url": "x"}'),
        ToolCall("call_2", "add", '{"a": 2, "b": 2}'),
    )
    assert assistant.extra == {"refusal": None}
    assert tool == Message(
        "tool", (ToolResult("call_1", (Text("a cat"),)), ToolResult("call_2", (Text("4"),)))
    )
    assert [t.name for t in req.tools] == ["describe", "add"]
    assert req.tools[1].extra == {"strict": True}
    assert req.tool_choice == ToolChoice("auto", None, True)
    assert (req.max_tokens, req.temperature, req.top_p, req.top_k) == (512, 0.6, 0.95, 20)
    assert (req.stop, req.seed, req.user, req.stream) == (("</answer>",), 7, "rollout-17", True)
    assert req.origin == "chat"
    assert req.extra == {
        "stream_options": {"include_usage": True},
        "n": 1,
        "logprobs": True,
        "chat_template_kwargs": {"enable_thinking": True},
        "max_completion_tokens": 512,
    }


def test_agent_body_renders_back_as_sent() -> None:
    body = chat.from_canonical(chat.to_canonical(copy.deepcopy(AGENT_BODY)))
    assert body == AGENT_BODY
    assert chat.validate_request(orjson.dumps(body)) == body


def test_plain_forms() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stop": "x"}
    req = chat.to_canonical(body)
    assert (req.max_tokens, req.stop, req.origin) == (5, ("x",), None)
    assert chat.from_canonical(req) == {**body, "stop": ["x"]}


def test_developer_and_late_system_messages() -> None:
    body = {
        "messages": [
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "reminder"},
        ]
    }
    req = chat.to_canonical(body)
    assert req.system == (Text("rules", {"role": "developer"}),)
    assert req.messages[1] == Message("user", (Text("reminder"),), {"role": "system"})
    assert chat.from_canonical(req) == body
    # Responses has both roles; Anthropic has no developer role, and a late system
    # message is a system entry in place (its mid-conversation system beta)
    assert responses.from_canonical(req)["input"][0] == {
        "type": "message",
        "role": "developer",
        "content": "rules",
    }
    out = messages.from_canonical(req)
    assert out["system"] == "rules"
    assert out["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "reminder"},
    ]


def test_vllm_reasoning_spelling_is_kept() -> None:
    msg = {"role": "assistant", "content": "4", "reasoning": "2+2"}
    body = {"messages": [{"role": "user", "content": "?"}, msg]}
    req = chat.to_canonical(body)
    assert req.messages[1].parts == (Reasoning("2+2", extra={"fields": ["reasoning"]}), Text("4"))
    assert chat.from_canonical(req) == body
    assert messages.from_canonical(req)["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "2+2",
        "signature": "",
    }


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda b: b["messages"][1]["content"].append(
                {"type": "input_audio", "input_audio": {}}
            ),
            "messages[1].content[2].type",
        ),
        (
            lambda b: b["messages"][1]["content"].append({"type": "text"}),
            "messages[1].content[2].text",
        ),
        (
            lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments={"a": 1}),
            "messages[2].tool_calls[0].function.arguments",
        ),
        (
            lambda b: b["messages"][2]["tool_calls"][0].update(type="custom"),
            "messages[2].tool_calls[0].type",
        ),
        (
            lambda b: b["messages"].append({"role": "function", "name": "f", "content": "x"}),
            "messages[5].role",
        ),
        (lambda b: b["messages"][3].pop("tool_call_id"), "messages[3].tool_call_id"),
        (lambda b: b.update(stop=[1]), "stop"),
        (lambda b: b["tools"][0]["function"].pop("name"), "tools[0].function.name"),
    ],
)
def test_errors_name_the_field(mutate: Any, field: str) -> None:
    body = copy.deepcopy(AGENT_BODY)
    mutate(body)
    with pytest.raises(InvalidRequestError) as info:
        chat.to_canonical(body)
    assert info.value.field == field


def test_validation_tolerates_what_has_no_canonical_form() -> None:
    body = copy.deepcopy(AGENT_BODY)
    body["messages"][1]["content"].append(
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
    )
    body["messages"].append({"role": "function", "name": "f", "content": "x"})
    assert chat.validate_request(orjson.dumps(body)) == body
    body["messages"][1]["content"].append({"type": 3})
    with pytest.raises(InvalidRequestError) as info:
        chat.validate_request(orjson.dumps(body))
    assert info.value.field == "messages[1].content[3].type"


def test_cross_dialect_refuses_unknown_fields_and_drops_the_allowlisted() -> None:
    body = copy.deepcopy(AGENT_BODY)
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(chat.to_canonical(body))
    assert info.value.field == "logprobs"
    del body["logprobs"], body["chat_template_kwargs"]
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(chat.to_canonical(body))
    assert info.value.field == "seed"  # Anthropic has none
    del body["seed"]
    rendered = messages.from_canonical(chat.to_canonical(body))
    assert "n" not in rendered and "stream_options" not in rendered
    assert rendered["max_tokens"] == 512
    assert rendered["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": False}
    assert rendered["metadata"] == {"user_id": "rollout-17"}
    body["n"] = 2
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(chat.to_canonical(body))
    assert info.value.field == "n"


def test_message_and_part_extras_are_refused_or_dropped_by_name() -> None:
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": "hi", "name": "alice"},
            {"role": "assistant", "content": "yo", "refusal": None, "annotations": []},
        ]
    }
    req = chat.to_canonical(body)
    assert chat.from_canonical(req) == body
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(req)
    assert info.value.field == "messages[0].name"
    del body["messages"][0]["name"]
    # null and empty echoes of the SDK are no loss
    assert messages.from_canonical(chat.to_canonical(body))["messages"][1] == {
        "role": "assistant",
        "content": "yo",
    }


def test_unknown_chat_fields_pass_through_within_chat() -> None:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "hi"}],
        "repetition_penalty": 1.1,
        "min_p": None,
        "response_format": {"type": "json_object"},
    }
    assert chat.from_canonical(chat.to_canonical(body)) == body
    with pytest.raises(InvalidRequestError) as info:
        responses.from_canonical(chat.to_canonical(body))
    assert info.value.field == "repetition_penalty"
