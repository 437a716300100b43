"""Across dialects: what one dialect's conversation becomes in another, and the 400s
for what the target cannot express."""

from __future__ import annotations

import pytest

from rolltap.dialects.canonical import Image, Message, Request, Text, ToolCall, ToolResult
from rolltap.dialects.chat import dialect as chat
from rolltap.dialects.messages import dialect as messages
from rolltap.dialects.responses import dialect as responses
from rolltap.errors import InvalidRequestError


@pytest.mark.parametrize(
    ("arguments", "ok"),
    [('{"a": 1}', True), ("", True), ("[1, 2]", False), ('{"a": ', False)],
)
def test_arguments_must_be_an_object_for_messages(arguments: str, ok: bool) -> None:
    call = ToolCall("c1", "f", arguments)
    req = Request(messages=(Message("user", (Text("go"),)), Message("assistant", (call,))))
    if ok:
        block = messages.from_canonical(req)["messages"][1]["content"][0]
        assert block == {
            "type": "tool_use",
            "id": "c1",
            "name": "f",
            "input": {"a": 1} if arguments else {},
        }
        return
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(req)
    assert info.value.field == "messages[1].parts[0].arguments"


def test_tool_results_lose_is_error_in_chat() -> None:
    req = Request(
        messages=(
            Message("assistant", (ToolCall("c1", "f", "{}"),)),
            Message("tool", (ToolResult("c1", (Text("boom"),), is_error=True),)),
        )
    )
    assert chat.from_canonical(req)["messages"][1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "boom",
    }
    images = Request(
        messages=(Message("tool", (ToolResult("c1", (Image("url", "https://x/y.png"),)),)),)
    )
    with pytest.raises(InvalidRequestError) as info:
        chat.from_canonical(images)
    assert info.value.field == "messages[0].parts[0].content[0]"


def test_chat_conversation_in_messages() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "developer", "content": "Be terse."},
            {"role": "user", "content": "Add 1 and 2, twice."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
            {"role": "tool", "tool_call_id": "c2", "content": "3"},
            {"role": "user", "content": "Thanks."},
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }
    out = messages.from_canonical(chat.to_canonical(body))
    assert out["max_tokens"] == messages.DEFAULT_MAX_TOKENS
    assert out["system"] == "Be terse."
    assert out["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "c1",
        "name": "add",
        "input": {"a": 1, "b": 2},
    }
    assert out["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "3"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "3"},
            {"type": "text", "text": "Thanks."},
        ],
    }
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


def test_mid_conversation_system_and_seed_have_no_messages_form() -> None:
    req = Request(messages=(Message("user", (Text("a"),)),), seed=1)
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(req)
    assert info.value.field == "seed"
    inline = Request(messages=(Message("user", (Image("base64", "AAAA"),)),))
    with pytest.raises(InvalidRequestError) as info:
        messages.from_canonical(inline)
    assert info.value.field == "messages[0].parts[0].media_type"


@pytest.mark.parametrize(
    ("field", "value", "refused"),
    [
        ("text", {"format": {"type": "text"}, "verbosity": "medium"}, None),
        ("text", {"verbosity": "low"}, None),  # presentation: dropped (and recorded)
        ("text", {"format": {"type": "json_object"}}, "text.format"),
        ("truncation", "disabled", None),
        ("truncation", "auto", None),  # the provider's own truncation: dropped
        ("store", True, None),
        ("previous_response_id", "resp_1", "previous_response_id"),
    ],
)
def test_responses_settings_at_their_defaults_may_be_dropped(
    field: str, value: object, refused: str | None
) -> None:
    req = responses.to_canonical({"input": "hi", field: value})
    if refused is None:
        assert chat.from_canonical(req) == {"messages": [{"role": "user", "content": "hi"}]}
        return
    with pytest.raises(InvalidRequestError) as info:
        chat.from_canonical(req)
    assert info.value.field == refused
