"""Every dialect reads requests into one answer: the same conversation gets the same
words on every route, and any JSON body is answered or refused, never crashes."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rolltap.sim import SimConfig
from rolltap.sim.chat import CHAT
from rolltap.sim.chat import prompt_for as chat_prompt
from rolltap.sim.content import BadRequest, answer_for
from rolltap.sim.messages import COUNT_TOKENS, MESSAGES
from rolltap.sim.messages_in import prompt_for as messages_prompt
from rolltap.sim.plan import Dialect
from rolltap.sim.responses import RESPONSES
from rolltap.sim.responses_in import prompt_for as responses_prompt


def test_one_conversation_one_answer_on_every_route() -> None:
    config = SimConfig(seed=9)
    args = {"query": "x", "limit": 1}
    chat = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Find it."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": orjson.dumps(args).decode()},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        ]
    }
    messages = {
        "model": "m",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "Find it."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": args}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}],
            },
        ],
    }
    responses = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Find it."}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "lookup",
                "arguments": '{"limit":1,"query":"x"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
    }
    answers = [
        answer_for(chat_prompt(chat, config), config),
        answer_for(messages_prompt(messages), config),
        answer_for(responses_prompt(responses), config),
    ]
    assert len({(a.text, a.prompt_tokens, a.stop) for a in answers}) == 1
    assert answers[0].text
    assert answers[0].prompt_tokens == len("Be brief.Find it.42") // 4 + 1


_SCALAR = st.none() | st.booleans() | st.integers(-5, 2**63 - 1) | st.text(max_size=6)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_SCHEMA = st.fixed_dictionaries(
    {}, optional={"properties": st.dictionaries(st.text(max_size=3), _JSON, max_size=3)}
)
_BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image"])},
    optional={
        "text": st.text(max_size=5) | _JSON,
        "name": st.text(max_size=3) | _JSON,
        "input": _JSON,
        "content": st.text(max_size=5) | _JSON,
    },
)
_ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "function_call", "function_call_output"]) | _JSON,
        "role": st.sampled_from(["user", "assistant", "developer"]) | _JSON,
        "content": st.text(max_size=5) | st.lists(_BLOCK, max_size=2) | _JSON,
        "name": _JSON,
        "arguments": _JSON,
        "output": _JSON,
    },
)
_BODY = st.fixed_dictionaries(
    {},
    optional={
        "model": st.just("m") | _JSON,
        "max_tokens": st.integers(-1, 40) | _JSON,
        "max_output_tokens": st.integers(-1, 40) | _JSON,
        "messages": st.lists(_ITEM, max_size=3) | _JSON,
        "input": st.text(max_size=5) | st.lists(_ITEM, max_size=3) | _JSON,
        "system": _JSON,
        "instructions": _JSON,
        "tools": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.just("function") | _JSON,
                    "name": st.text(max_size=4) | _JSON,
                    "input_schema": _JSON,
                    "parameters": _JSON,
                },
            ),
            max_size=2,
        )
        | _JSON,
        "tool_choice": _JSON,
        "stop_sequences": st.lists(st.text(max_size=3), max_size=2) | _JSON,
        "stream": st.booleans() | _JSON,
    },
)


_TOOL = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b"])},
    optional={
        "type": st.sampled_from(["function", "custom", "web_search"]),
        "input_schema": _SCHEMA,
        "parameters": _SCHEMA,
    },
)
_CHOICE = st.sampled_from(["none", "auto", "required"]) | st.fixed_dictionaries(
    {"type": st.sampled_from(["auto", "any", "none", "tool", "function"])},
    optional={"name": st.sampled_from(["a", "b"])},
)
#: Messages bodies that are mostly well formed, so most reach rendering.
_MESSAGES_BODY = st.fixed_dictionaries(
    {
        "model": st.just("m"),
        "max_tokens": st.integers(1, 40),
        "messages": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "assistant"]),
                    "content": st.text(max_size=5) | st.lists(_BLOCK, max_size=3),
                }
            ),
            min_size=1,
            max_size=3,
        ),
    },
    optional={
        "system": st.text(max_size=4) | st.lists(_BLOCK, max_size=2),
        "tools": st.lists(_TOOL, max_size=2),
        "tool_choice": _CHOICE,
        "stop_sequences": st.lists(st.text(max_size=3), max_size=2),
        "stream": st.booleans(),
    },
)
#: Responses bodies that are mostly well formed.
_RESPONSES_BODY = st.fixed_dictionaries(
    {"model": st.just("m"), "input": st.text(max_size=5) | st.lists(_ITEM, max_size=3)},
    optional={
        "instructions": st.text(max_size=4),
        "max_output_tokens": st.integers(0, 40),
        "tools": st.lists(_TOOL, max_size=2),
        "tool_choice": _CHOICE,
        "stream": st.booleans(),
    },
)


_ALL = st.sampled_from([MESSAGES, COUNT_TOKENS, RESPONSES, CHAT])
_CASES = (
    st.tuples(st.sampled_from([MESSAGES, COUNT_TOKENS]), _MESSAGES_BODY)
    | st.tuples(st.just(RESPONSES), _RESPONSES_BODY)
    | st.tuples(_ALL, _BODY | _MESSAGES_BODY | _RESPONSES_BODY)
)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(case=_CASES)
def test_any_body_is_answered_or_refused(case: tuple[Dialect, dict[str, Any]]) -> None:
    dialect, body = case
    try:
        plan = dialect.plan(body, SimConfig(completion_tokens=4))
    except BadRequest:
        return
    holes = dialect.holes(3, 0)
    if not plan.stream:
        orjson.loads(plan.body.render(holes))
        return
    for event in plan.events:
        data = event.render(holes).split(b"data: ", 1)[1]
        if data != b"[DONE]\n\n":
            orjson.loads(data)


def test_chat_stop_cuts_the_text_like_stop_sequences() -> None:
    config = SimConfig(seed=2)
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "Hi"}]}
    whole = answer_for(chat_prompt(body, config), config).text
    stop = " " + whole.split(" ")[2]
    cut = answer_for(chat_prompt({**body, "stop": [stop]}, config), config)
    assert (cut.text, cut.stop, cut.stop_sequence) == (
        whole[: whole.index(stop)],
        "stop_sequence",
        stop,
    )
    finish = orjson.loads(CHAT.plan({**body, "stop": stop}, config).body.render(CHAT.holes(1, 0)))
    assert finish["choices"][0]["finish_reason"] == "stop"
    messages = {
        "model": "m",
        "max_tokens": 9,
        "messages": body["messages"],
        "stop_sequences": [stop],
    }
    assert answer_for(messages_prompt(messages), config).text == cut.text


def test_an_empty_completion_has_no_content_block() -> None:
    config = SimConfig(completion_tokens=0)
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]}
    holes = MESSAGES.holes(1, 0)
    message = orjson.loads(MESSAGES.plan(body, config).body.render(holes))
    assert (message["content"], message["stop_reason"]) == ([], "end_turn")
    stream = MESSAGES.plan({**body, "stream": True}, config)
    names = [e.render(holes).split(b"\n", 1)[0] for e in stream.events]
    assert names == [
        b"event: message_start",
        b"event: ping",
        b"event: message_delta",
        b"event: message_stop",
    ]
    plan = RESPONSES.plan({"model": "m", "input": "Hi"}, config)
    response = orjson.loads(plan.body.render(RESPONSES.holes(1, 0)))
    assert response["output"][0]["content"][0]["text"] == ""
