"""The Messages validator's shortcut (``plainly_valid``) never lets a bad body through.

The gateway skips the canonical parse when ``plainly_valid`` says the body could not fail
it; so True must mean the parse raises nothing, and ``validate_body`` answers every body
as it did with the parse alone. Bodies are drawn with good and bad values at every place
the parse reads.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dialects.plainkit import refused_field, single_edits
from rolltap.dialects.messages import dialect as anthropic_messages
from rolltap.dialects.messages.dialect import validate_body
from rolltap.dialects.messages.parse import parse_request_body
from rolltap.dialects.messages.plain import plainly_valid
from rolltap.errors import InvalidRequestError

_JUNK = [
    None, 0, 1.5, True, "x", [], {}, [1], {"a": 1}, [{"a": 1}],
    "text", "image", "tool_use", "tool_result", "thinking", "tool", "custom", "user",
]  # fmt: skip
_text = st.text(max_size=4)
_cache = st.fixed_dictionaries({"type": st.just("ephemeral")})

_text_block = st.fixed_dictionaries(
    {"type": st.just("text"), "text": _text}, optional={"cache_control": _cache}
)
_source = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("base64"), "media_type": st.just("image/png"), "data": _text}
    ),
    st.fixed_dictionaries({"type": st.just("url"), "url": _text}),
)
_image = st.fixed_dictionaries({"type": st.just("image"), "source": _source})
_document = st.fixed_dictionaries(
    {"type": st.just("document"),
     "source": st.fixed_dictionaries({"type": st.just("text"), "data": _text})}
)  # fmt: skip
_json_int = st.integers(-(2**63), 2**64 - 1)  # what orjson parses as an int (see below)
_tool_use = st.fixed_dictionaries(
    {"type": st.just("tool_use"), "id": _text, "name": _text,
     "input": st.dictionaries(_text, st.one_of(_json_int, _text), max_size=2)}
)  # fmt: skip
_tool_result = st.fixed_dictionaries(
    {"type": st.just("tool_result"), "tool_use_id": _text},
    optional={
        "content": st.one_of(_text, st.lists(st.one_of(_text_block, _image), max_size=2)),
        "is_error": st.booleans(),
        "cache_control": _cache,
    },
)
_thinking = st.fixed_dictionaries(
    {"type": st.just("thinking"), "thinking": _text}, optional={"signature": _text}
)
_redacted = st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": _text})
_block = st.one_of(_text_block, _image, _document, _tool_use, _tool_result, _thinking, _redacted)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]),
     "content": st.one_of(_text, st.lists(_block, max_size=3))}
)  # fmt: skip
_tool = st.one_of(
    st.fixed_dictionaries(
        {"name": _text, "input_schema": st.fixed_dictionaries({"type": st.just("object")})},
        optional={
            "type": st.just("custom"),
            "description": _text,
            "strict": st.booleans(),
            "cache_control": _cache,
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("web_search_20250305"), "name": st.just("web_search")},
        optional={"max_uses": st.integers(1, 5)},
    ),
)
_no_parallel = {"disable_parallel_tool_use": st.booleans()}
_tool_choice = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["auto", "any", "none"])}, optional=_no_parallel
    ),
    st.fixed_dictionaries({"type": st.just("tool"), "name": _text}, optional=_no_parallel),
)
_body = st.fixed_dictionaries(
    {"max_tokens": st.integers(1, 9), "messages": st.lists(_message, min_size=1, max_size=4)},
    optional={
        "model": _text,
        "system": st.one_of(_text, st.lists(_text_block, max_size=2)),
        "tools": st.lists(_tool, max_size=3),
        "tool_choice": _tool_choice,
        "stop_sequences": st.lists(_text, max_size=2),
        "temperature": st.floats(0, 1),
        "top_p": st.floats(0, 1),
        "top_k": st.integers(0, 50),
        "stream": st.booleans(),
        "metadata": st.fixed_dictionaries({"user_id": _text}),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_body, st.integers(0, 4))
def test_no_single_edit_of_a_drawn_body_gets_past_the_parse(
    body: dict[str, Any], start: int
) -> None:
    """Every single edit of each drawn body, not one drawn edit: one edit seldom lands on
    the one place a check guards (with one edit per body, 22 of 51 checks left out of
    ``plainly_valid`` survived 1000 examples; with all of them, none survives 200)."""
    for changed in single_edits(body, _JUNK):
        if plainly_valid(changed, start):
            parse_request_body(changed, tolerant=True, start=start)  # must not raise


@pytest.mark.parametrize(
    "raw",
    [b"18446744073709551615", b"18446744073709551616", b"-9223372036854775808",
     b"-9223372036854775809", b"1" + b"0" * 30],
)  # fmt: skip
def test_what_orjson_parses_dumps_back(raw: bytes) -> None:
    """The parse dumps a tool call's input to JSON text and ``plainly_valid`` trusts that
    it can: orjson reads an integer out of the range it writes as a float, and refuses what its
    writer would (lone surrogates, an infinite number)."""
    assert orjson.loads(orjson.dumps(orjson.loads(raw))) == orjson.loads(raw)
    for refused in (b'"\\ud800"', b"1" + b"0" * 400):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(refused)


def _agent_turn() -> dict[str, Any]:
    """A turn of an agent loop as the SDK sends it: a thinking model's answer appended
    whole, then the tool's result."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    return {
        "model": "m",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "be an agent", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Looking.", "citations": None},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"},
            ]},
        ],
        "tools": [{"name": "bash", "description": "run", "input_schema": schema,
                   "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "u"},
        "stream": True,
    }  # fmt: skip


def _full_body() -> dict[str, Any]:
    """Every field the parse reads, each in its plain form."""
    body = _agent_turn()
    body["messages"] += [
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "no such file"}]},
            {"type": "tool_result", "tool_use_id": "toolu_2"},
            {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}},
        ]},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    body["tools"] += [
        {"type": "custom", "name": "edit", "description": "e", "input_schema": {}, "strict": True},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
    ]
    body.update(
        tool_choice={"type": "tool", "name": "bash", "disable_parallel_tool_use": True},
        stop_sequences=["\n\nHuman:"],
        temperature=1,
        top_p=0.9,
        top_k=5,
    )
    return body


def _refusal(body: dict[str, Any], start: int) -> tuple[str | None, str] | None:
    """What ``validate_body`` refuses ``body`` with: the field and the message."""
    try:
        validate_body(body, start)
    except InvalidRequestError as err:
        return err.field, str(err)
    return None


def test_every_single_edit_of_a_full_body(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exhaustively: each place of a body using every field, given each bad value or
    removed, is answered exactly as the parse alone answered it."""
    body = _full_body()
    assert plainly_valid(body, 0)
    for changed in single_edits(body, _JUNK):
        for start in (0, 3, len(body["messages"])):
            if plainly_valid(changed, start):
                parse_request_body(changed, tolerant=True, start=start)  # must not raise
            got = _refusal(changed, start)
            with monkeypatch.context() as patch:
                patch.setattr(anthropic_messages, "plainly_valid", lambda _body, _start: False)
                assert got == _refusal(changed, start), changed


def _sent_by_the_sdk() -> dict[str, Any]:
    """The body the official SDK sends for the second call of an agent loop."""
    sent: list[dict[str, Any]] = []
    answer = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": _agent_turn()["messages"][1]["content"],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }  # fmt: skip

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(orjson.loads(request.content))
        return httpx2.Response(200, json=answer)

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    client = anthropic.Anthropic(
        api_key="k", base_url="http://upstream.test", http_client=http, max_retries=0
    )
    turn = _agent_turn()
    history: list[Any] = turn["messages"][:1]
    params: dict[str, Any] = {
        k: turn[k] for k in ("model", "max_tokens", "system", "tools", "tool_choice")
    }
    with client:
        first = client.messages.create(messages=history, **params)
        history += [
            {"role": "assistant", "content": first.content},  # the SDK's own objects
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                 "content": [{"type": "text", "text": "warning"}]},
            ]},
        ]  # fmt: skip
        client.messages.create(messages=history, stop_sequences=["###"], **params)
    return sent[-1]


def test_the_usual_agent_turn_takes_the_shortcut() -> None:
    """The shapes the SDK sends are plain: the shortcut is not dead code."""
    for body in (_agent_turn(), _sent_by_the_sdk()):
        assert plainly_valid(body, 0)
        assert plainly_valid(body, len(body["messages"]) - 2)


@pytest.mark.parametrize(
    ("edit", "param"),
    [
        (lambda b: b["messages"][1]["content"][2].pop("name"), "messages[1].content[2].name"),
        (lambda b: b["messages"][1]["content"].append({"type": "text"}),
         "messages[1].content[3].text"),
        (lambda b: b["messages"][2]["content"][0].update(content=[{"type": "text"}]),
         "messages[2].content[0].content[0].text"),
        # system entries are valid (Anthropic's mid-conversation system beta); tool is not
        (lambda b: b["messages"][0].update(role="tool"), "messages[0].role"),
        (lambda b: b["messages"][0].update(content=None), "messages[0].content"),
        (lambda b: b["messages"][0].update(content=[{"type": "image", "source": {}}]),
         "messages[0].content[0].source.type"),
        (lambda b: b["system"].append({"type": "image", "source": {"type": "url", "url": "u"}}),
         "system[1].type"),
        (lambda b: b.update(top_k="3"), "top_k"),
        (lambda b: b.update(stop_sequences=["a", 1]), "stop_sequences"),
        (lambda b: b["tools"][0].update(description=5), "tools[0].description"),
        (lambda b: b.update(tool_choice={"type": "tool"}), "tool_choice.name"),
        (lambda b: b.update(metadata={"user_id": 5}), "metadata.user_id"),
    ],
)  # fmt: skip
def test_what_is_not_plain_is_still_refused_by_name(edit: Any, param: str) -> None:
    body = _agent_turn()
    edit(body)
    assert refused_field(body, plainly_valid, validate_body) == param


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
        {"type": "document", "source": {"type": "text", "data": "d"}},
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "search_result"}]},
    ],
)
def test_what_is_not_plain_may_still_pass(block: dict[str, Any]) -> None:
    """Outside the plain shape the parse decides, and it accepts these."""
    body = _agent_turn()
    body["messages"][2]["content"].append(block)
    assert not plainly_valid(body, 0)
    assert validate_body(body, 0) is body
