"""Canonical messages and tools → chat-template dicts."""

from __future__ import annotations

import pytest

from rolltap.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)
from rolltap.errors import InvalidRequestError
from rolltap.tokens import request_to_template, to_template_messages, to_template_tools


def test_a_tool_loop_maps_field_by_field() -> None:
    messages = (
        Message("user", (Text("Add 1 and 2."), Text("Then stop."))),
        Message(
            "assistant",
            (Reasoning("use add"), Text("Adding."), ToolCall("c1", "add", '{"a": 1, "b": 2}')),
        ),
        Message("tool", (ToolResult("c1", (Text("3"),)),)),
    )
    assert to_template_messages(messages) == [
        {"role": "user", "content": "Add 1 and 2.\nThen stop."},
        {
            "role": "assistant",
            "content": "Adding.",
            "reasoning_content": "use add",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "c1",
                    "function": {"name": "add", "arguments": {"a": 1, "b": 2}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "3"},
    ]


def test_system_texts_merge_per_role() -> None:
    system = (Text("A."), Text("B."), Text("C.", extra={"role": "developer"}))
    request = Request((Message("user", (Text("hi"),)),), system=system)
    messages, tools = request_to_template(request)
    assert messages[:2] == [
        {"role": "system", "content": "A.\nB."},
        {"role": "developer", "content": "C."},
    ]
    assert tools is None


def test_tools_are_function_schemas() -> None:
    tools = (Tool("add", "Add.", {"type": "object", "properties": {"a": {}}}), Tool("now"))
    assert to_template_tools(tools) == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add.",
                "parameters": {"type": "object", "properties": {"a": {}}},
            },
        },
        {
            "type": "function",
            "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
        },
    ]


@pytest.mark.parametrize("arguments", ["not json", "[1, 2]", '"x"'])
def test_arguments_that_are_not_an_object_stay_raw(arguments: str) -> None:
    [message] = to_template_messages([Message("assistant", (ToolCall("c", "f", arguments),))])
    assert message["tool_calls"][0]["function"]["arguments"] == arguments
    assert message["content"] is None


def test_empty_arguments_are_an_empty_object() -> None:
    [message] = to_template_messages([Message("assistant", (ToolCall("c", "f", " "),))])
    assert message["tool_calls"][0]["function"]["arguments"] == {}


def test_results_in_a_user_message_come_first_and_unknown_calls_have_no_name() -> None:
    message = Message("user", (ToolResult("zz", (Text("r"),)), Text("next")))
    assert to_template_messages([message]) == [
        {"role": "tool", "tool_call_id": "zz", "content": "r"},
        {"role": "user", "content": "next"},
    ]


def test_images_are_refused_naming_the_part() -> None:
    image = Image("url", "http://x/y.png")
    with pytest.raises(InvalidRequestError) as info:
        to_template_messages([Message("user", (Text("see"), image))])
    assert info.value.field == "messages[0].parts[1]"
    result = ToolResult("c", (image,))
    with pytest.raises(InvalidRequestError) as info:
        to_template_messages([Message("tool", (result,))])
    assert info.value.field == "messages[0].parts[0].content[0]"


def test_tool_messages_hold_only_results() -> None:
    with pytest.raises(InvalidRequestError) as info:
        to_template_messages([Message("tool", (Text("x"),))])
    assert info.value.field == "messages[0].parts[0]"
