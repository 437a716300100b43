"""Answer generation is total: any JSON object is answered or refused, never crashes."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rolltap.sim import SimConfig
from rolltap.sim.chat import CHAT, prompt_for
from rolltap.sim.content import BadRequest, answer_for, tool_arguments
from rolltap.sim.words import WORDS

_SCALAR = st.none() | st.booleans() | st.integers(-5, 2**63 - 1) | st.floats() | st.text(max_size=8)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_SCHEMA = st.fixed_dictionaries(
    {}, optional={"properties": st.dictionaries(st.text(max_size=5), _JSON, max_size=3)}
)
_TOOL = (
    st.fixed_dictionaries(
        {},
        optional={
            "type": _JSON,
            "function": st.fixed_dictionaries(
                {}, optional={"name": _JSON, "parameters": _SCHEMA | _JSON}
            ),
        },
    )
    | _JSON
)
_MESSAGE = (
    st.fixed_dictionaries(
        {},
        optional={"role": st.sampled_from(["user", "tool", "assistant"]) | _JSON, "content": _JSON},
    )
    | _JSON
)
_BODY = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(_MESSAGE, max_size=3) | _JSON,
        "tools": st.lists(_TOOL, max_size=2) | _JSON,
        "tool_choice": st.sampled_from(["none", "auto"]) | _JSON
        | st.fixed_dictionaries({"function": st.fixed_dictionaries({"name": _JSON})}),
        "max_tokens": _JSON,
        "max_completion_tokens": _JSON,
        "logprobs": _JSON,
        "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": _JSON}) | _JSON,
        "model": _JSON,
    },
)  # fmt: skip


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(body=_BODY)
def test_any_body_is_answered_or_refused(body: dict[str, Any]) -> None:
    try:
        plan = CHAT.plan(body, SimConfig())
    except BadRequest:
        return
    holes = CHAT.holes(1, 0)
    if plan.stream:
        for event in plan.events[:-1]:
            orjson.loads(event.render(holes).removeprefix(b"data: "))
    else:
        orjson.loads(plan.body.render(holes))


@given(messages=st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": st.text()})))
def test_same_messages_same_words(messages: list[dict[str, Any]]) -> None:
    body = {"messages": messages, "max_tokens": 5}
    config = SimConfig(seed=3)
    first = answer_for(prompt_for(body, config), config)
    assert first == answer_for(prompt_for(dict(body), config), config)
    assert set(t.strip() for t in first.tokens) <= set(WORDS)
    assert len(first.tokens) == 5


def test_prompt_token_estimate_counts_text_parts() -> None:
    parts = [{"type": "text", "text": "abcd" * 3}, {"type": "image_url", "image_url": {}}]
    messages = [{"role": "user", "content": "abcd"}, {"role": "user", "content": parts}]
    assert prompt_for({"messages": messages}, SimConfig()).prompt_tokens == 16 // 4 + 1


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (None, {}),
        ({"type": "object"}, {}),
        ({"properties": {"s": {"type": "string"}, "n": {"type": "number"}}}, {"s": "x", "n": 1}),
        (
            {"properties": {"b": {"type": "boolean"}, "o": {"type": "object"}}},
            {"b": True, "o": None},
        ),
    ],
)
def test_tool_arguments_from_schema(schema: Any, expected: dict[str, Any]) -> None:
    assert orjson.loads(tool_arguments(schema)) == expected
