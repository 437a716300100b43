"""The table's mappings one by one: system text in place, developer roles, reasoning
effort both ways, elements with no canonical form, vendor headers, the token client's
canonical request."""

from __future__ import annotations

from typing import Any

import pytest

from dialects.agentkit import captured
from rolltap.dialects.canonical import Text
from rolltap.dialects.translate import (
    Dropped,
    canonical_request,
    dropped_headers,
    translate_request,
)
from rolltap.errors import ConfigError, InvalidRequestError


def _messages_body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
            **fields}  # fmt: skip


@pytest.mark.parametrize(
    ("thinking", "config", "effort"),
    [
        ({"type": "enabled", "budget_tokens": 1024}, None, "low"),
        ({"type": "enabled", "budget_tokens": 4095}, None, "low"),
        ({"type": "enabled", "budget_tokens": 4096}, None, "medium"),
        ({"type": "enabled", "budget_tokens": 16383}, None, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, None, "high"),
        ({"type": "adaptive"}, None, None),  # the model decides: nothing to map
        ({"type": "adaptive"}, {"effort": "low"}, "low"),
        ({"type": "enabled", "budget_tokens": 30000}, {"effort": "medium"}, "medium"),
        (None, {"effort": "max"}, "xhigh"),
    ],
)
def test_messages_thinking_and_effort_become_reasoning_effort(
    thinking: dict[str, Any] | None, config: dict[str, Any] | None, effort: str | None
) -> None:
    fields = {k: v for k, v in (("thinking", thinking), ("output_config", config)) if v}
    chat = translate_request(_messages_body(**fields), "messages", "chat")
    assert chat.body.get("reasoning_effort") == effort
    assert chat.dropped == []  # mapped, not dropped
    responses = translate_request(_messages_body(**fields), "messages", "responses")
    assert responses.body.get("reasoning") == (None if effort is None else {"effort": effort})


def test_thinking_disabled_is_dropped_and_recorded() -> None:
    out = translate_request(_messages_body(thinking={"type": "disabled"}), "messages", "chat")
    assert "reasoning_effort" not in out.body
    assert [d.path for d in out.dropped] == ["thinking.type"]


@pytest.mark.parametrize(
    ("effort", "messages"),
    [
        ("low", {"output_config": {"effort": "low"}}),
        ("minimal", {"output_config": {"effort": "low"}}),  # Anthropic's lowest
        ("xhigh", {"output_config": {"effort": "xhigh"}}),
        ("none", {"thinking": {"type": "disabled"}}),
    ],
)
def test_reasoning_effort_reaches_messages_and_responses(
    effort: str, messages: dict[str, Any]
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": effort}  # fmt: skip
    out = translate_request(body, "chat", "messages").body
    assert {k: out[k] for k in messages} == messages
    assert translate_request(body, "chat", "responses").body["reasoning"] == {"effort": effort}
    responses = {"model": "m", "input": "hi", "reasoning": {"effort": effort}}
    assert translate_request(responses, "responses", "chat").body["reasoning_effort"] == effort


def test_system_entries_stay_where_they_stand_in_every_dialect() -> None:
    body = _messages_body(system="be brief")
    body["messages"] += [
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": [{"type": "text", "text": "now be terse",
                                        "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "again"},
    ]  # fmt: skip
    chat = translate_request(body, "messages", "chat")
    assert [(m["role"], m["content"]) for m in chat.body["messages"]] == [
        ("system", "be brief"), ("user", "hi"), ("assistant", "hello"),
        ("system", "now be terse"), ("user", "again"),
    ]  # fmt: skip
    assert [d.path for d in chat.dropped] == ["messages[].parts[].cache_control"]
    responses = translate_request(body, "messages", "responses").body
    assert [(i.get("role"), i.get("content")) for i in responses["input"]] == [
        ("user", "hi"), ("assistant", [{"type": "output_text", "text": "hello",
                                        "annotations": []}]),
        ("system", "now be terse"), ("user", "again"),
    ]  # fmt: skip
    # and back to Messages from chat: the entry in place, as Anthropic's beta takes it
    back = translate_request(chat.body, "chat", "messages").body
    assert back["system"] == "be brief"
    assert [m["role"] for m in back["messages"]] == ["user", "assistant", "system", "user"]


def test_developer_items_in_chat_and_messages() -> None:
    body = {
        "model": "m",
        "input": [
            {"type": "message", "id": "msg_1", "role": "developer", "content": "rules"},
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "message", "role": "developer", "content": "more rules"},
        ],
    }
    chat = translate_request(body, "responses", "chat")
    assert [(m["role"], m["content"]) for m in chat.body["messages"]] == [
        ("system", "rules"), ("user", "hi"), ("system", "more rules"),
    ]  # fmt: skip
    assert [d.path for d in chat.dropped] == ["messages[].id"]
    messages = translate_request(body, "responses", "messages").body
    assert messages["system"] == "rules"  # leading: Anthropic's system prompt
    assert messages["messages"] == [
        {"role": "user", "content": "hi"}, {"role": "system", "content": "more rules"},
    ]  # fmt: skip


def test_elements_with_no_canonical_form_are_the_policys() -> None:
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                               "data": "x"}}  # fmt: skip
    body = _messages_body()
    body["messages"][0]["content"] = [{"type": "text", "text": "read this"}, document]
    out = translate_request(body, "messages", "chat")
    assert out.body["messages"] == [{"role": "user", "content": "read this"}]
    assert [d.path for d in out.dropped] == ["messages[].content[type=document]"]
    with pytest.raises(InvalidRequestError) as info:
        translate_request(body, "messages", "chat", unsupported="refuse")
    assert info.value.field == "messages[0].content[1].type"
    searched = {"model": "m", "input": [
        {"type": "message", "role": "user", "content": "look it up"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]}  # fmt: skip
    out = translate_request(searched, "responses", "chat")
    assert [d.path for d in out.dropped] == ["input[type=web_search_call]"]
    assert out.body["messages"] == [{"role": "user", "content": "look it up"}]


def test_a_field_is_recorded_once_however_often_it_appears() -> None:
    cache = {"type": "ephemeral"}
    body = _messages_body(
        system=[
            {"type": "text", "text": "a", "cache_control": cache},
            {"type": "text", "text": "b", "cache_control": cache},
        ]
    )
    body["messages"][0]["content"] = [{"type": "text", "text": "x", "cache_control": cache}]
    out = translate_request(body, "messages", "chat")
    assert [d.rewrite() for d in out.dropped] == [
        {"dropped": "system[].cache_control", "reason": "a prompt-caching hint"},
        {"dropped": "messages[].parts[].cache_control", "reason": "a prompt-caching hint"},
    ]


def test_canonical_fields_a_target_lacks_are_the_policys() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 3,
            "stop": ["END"], "top_k": 5}  # fmt: skip
    out = translate_request(body, "chat", "responses")
    assert {d.path for d in out.dropped} == {"seed", "stop", "top_k"}
    assert not {"seed", "stop", "top_k", "stop_sequences"} & out.body.keys()
    with pytest.raises(InvalidRequestError) as info:
        translate_request(body, "chat", "messages", unsupported="refuse")
    assert info.value.field == "seed"
    del body["seed"]
    kept = translate_request(body, "chat", "messages", unsupported="refuse").body
    assert (kept["stop_sequences"], kept["top_k"]) == (["END"], 5)


def test_vendor_headers_are_dropped_only_across_vendors() -> None:
    claude = captured("claude_code").headers
    names = [d.path for d in dropped_headers(claude, "messages", "chat")]
    assert names == ["header:anthropic-beta", "header:anthropic-dangerous-direct-browser-access",
                     "header:anthropic-version"]  # fmt: skip
    assert dropped_headers(claude, "messages", "messages") == []
    openai = {"OpenAI-Beta": "responses=v1", "x-stainless-os": "Linux"}
    assert dropped_headers(openai, "responses", "chat") == []  # one vendor's two dialects
    assert [d.path for d in dropped_headers(openai, "chat", "messages")] == ["header:openai-beta"]


def test_the_token_clients_canonical_request() -> None:
    call = captured("codex")
    request, dropped = canonical_request(call.fresh(), "responses")
    assert {d.path for d in dropped} >= {"store", "tools[type=web_search]"}
    # the developer items, as chat has them: system text the template renders first
    developer = [p["text"] for item in call.body["input"][:2] for p in item["content"]]
    assert [t.text for t in request.system] == developer
    assert all("role" not in t.extra for t in request.system)
    assert [m.role for m in request.messages] == ["user", "user"]
    assert all(t.name != "multi_agent_v1" for t in request.tools)
    with pytest.raises(InvalidRequestError):
        canonical_request(call.fresh(), "responses", unsupported="refuse")
    chat = {"messages": [{"role": "developer", "content": "x"}, {"role": "user", "content": "y"}]}
    request, dropped = canonical_request(chat, "chat")
    assert (request.system, dropped) == ((Text("x", {"role": "developer"}),), [])


def test_a_policy_is_drop_or_refuse() -> None:
    with pytest.raises(ConfigError, match="'dorp'"):
        translate_request(_messages_body(), "messages", "chat", unsupported="dorp")  # type: ignore[arg-type]
    assert Dropped("a", "b").rewrite() == {"dropped": "a", "reason": "b"}
