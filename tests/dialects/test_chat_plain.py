"""The chat validator's shortcut (``plainly_valid``) never lets a bad body through.

The gateway skips the canonical parse when ``plainly_valid`` says the body could not fail
it; so for any body that passes ``check_request``, True must mean the parse raises
nothing. Bodies are drawn with good and bad values at every place the parse reads.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dialects.plainkit import refused_field, single_edits
from rolltap.dialects.chat.check import check_request
from rolltap.dialects.chat.dialect import validate_body
from rolltap.dialects.chat.parse import parse_request_body
from rolltap.dialects.chat.plain import plainly_valid
from rolltap.errors import InvalidRequestError

_JUNK = [None, 0, 1.5, True, "x", [], {}, [1], {"a": 1}, "image_url", "custom", "function"]
_text = st.text(max_size=4)

_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
    st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": _text})}
    ),
)
_content = st.one_of(st.none(), _text, st.lists(_part, max_size=3))
_call = st.fixed_dictionaries(
    {"id": _text, "type": st.just("function"),
     "function": st.fixed_dictionaries({"name": _text, "arguments": _text})}
)  # fmt: skip
_message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "function"])},
        optional={"content": _content, "name": _text},
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant")},
        optional={
            "content": _content,
            "tool_calls": st.lists(_call, max_size=2),
            "reasoning_content": _text,
        },
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "tool_call_id": _text}, optional={"content": _content}
    ),
)
_function = st.fixed_dictionaries(
    {"name": _text},
    optional={
        "description": _text,
        "parameters": st.fixed_dictionaries({"type": st.just("object")}),
        "strict": st.booleans(),
    },
)
_tool = st.fixed_dictionaries({"type": st.just("function"), "function": _function})
_tool_choice = st.one_of(
    st.sampled_from(["auto", "none", "required"]),
    st.fixed_dictionaries({"type": st.just("function"),
                           "function": st.fixed_dictionaries({"name": _text})}),
)  # fmt: skip
_body = st.fixed_dictionaries(
    {"messages": st.lists(_message, min_size=1, max_size=4)},
    optional={
        "model": _text,
        "tools": st.lists(_tool, max_size=3),
        "tool_choice": _tool_choice,
        "parallel_tool_calls": st.booleans(),
        "top_k": st.integers(0, 50),
        "stop": st.one_of(_text, st.lists(_text, max_size=2)),
        "user": _text,
        "max_tokens": st.integers(0, 9),
        "temperature": st.floats(0, 2),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_body, st.integers(0, 4))
def test_no_single_edit_of_a_drawn_body_gets_past_the_parse(
    body: dict[str, Any], start: int
) -> None:
    """Every single edit of each drawn body (one drawn edit seldom lands on the one
    place a check guards; see test_messages_plain.py)."""
    for changed in single_edits(body, _JUNK):
        messages = changed.get("messages")
        at = min(start, len(messages)) if isinstance(messages, list) else 0
        try:
            check_request(changed, at)
        except InvalidRequestError:
            continue  # refused before the shortcut is asked
        if plainly_valid(changed, at):
            parse_request_body(changed, tolerant=True, start=at)  # must not raise


def _full_body() -> dict[str, Any]:
    """Every field the parse reads, each in its plain form."""
    body = _agent_turn()
    body["messages"] += [
        {"role": "developer", "content": [{"type": "text", "text": "later"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}],
         "reasoning_content": "thought", "tool_calls": []},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "r"}]},
    ]  # fmt: skip
    body["tools"][0]["function"].update(description="d", strict=True)
    body.update(parallel_tool_calls=False, top_k=4, user="u", seed=1, stream=False)
    return body


def test_every_single_edit_of_a_full_body() -> None:
    """Exhaustively: each place of a body using every field, given each bad value."""
    body = _full_body()
    assert plainly_valid(body, 0)
    for changed in single_edits(body, _JUNK):
        for start in (0, 3):
            try:
                check_request(changed, start)
            except InvalidRequestError:
                continue
            if plainly_valid(changed, start):
                parse_request_body(changed, tolerant=True, start=start)


def _agent_turn() -> dict[str, Any]:
    call = {"id": "call_1", "type": "function",
            "function": {"name": "search", "arguments": '{"q": "x"}'}}  # fmt: skip
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "find it"}]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rows"},
        ],
        "tools": [{"type": "function", "function": {"name": "search", "parameters": {}}}],
        "tool_choice": "auto",
        "stop": ["\n\n"],
        "max_tokens": 16,
    }


def test_the_usual_agent_turn_takes_the_shortcut() -> None:
    """The shapes the SDKs send are plain: the shortcut is not dead code."""
    assert plainly_valid(_agent_turn(), 0)
    assert plainly_valid(_agent_turn(), 3)


@pytest.mark.parametrize(
    ("edit", "param"),
    [
        (lambda b: b["messages"][2]["tool_calls"][0]["function"].pop("name"),
         "messages[2].tool_calls[0].function.name"),
        (lambda b: b["messages"][1]["content"].append({"type": "text"}),
         "messages[1].content[1].text"),
        (lambda b: b.update(top_k="3"), "top_k"),
        (lambda b: b.update(stop=["a", 1]), "stop"),
        (lambda b: b["tools"][0]["function"].update(description=5),
         "tools[0].function.description"),
        (lambda b: b.update(tool_choice={"type": "function", "function": {}}),
         "tool_choice.function.name"),
    ],
)  # fmt: skip
def test_what_is_not_plain_is_still_refused_by_name(edit: Any, param: str) -> None:
    body = _agent_turn()
    edit(body)
    assert refused_field(body, plainly_valid, validate_body) == param
