"""The Responses validator's shortcut (``plainly_valid``) never lets a bad body through.

The gateway skips the canonical parse when ``plainly_valid`` says the body could not fail
it; so True must mean the tolerant parse raises nothing. Bodies are drawn with good and
bad values at every place the parse reads. (Responses has no ``check_request`` before
the parse: ``plainly_valid`` meets bodies of any shape.)
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dialects.plainkit import refused_field, single_edits
from rolltap.dialects.responses import dialect as openai_responses
from rolltap.dialects.responses.dialect import validate_body
from rolltap.dialects.responses.parse import parse_request_body
from rolltap.dialects.responses.plain import plainly_valid

_JUNK = [None, 0, 1.5, True, "x", [], {}, [1], {"a": 1},
         "message", "function", "input_image", "refusal", "assistant"]  # fmt: skip
_text = st.text(max_size=4)


def _mostly(plain: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``plain`` seven times in eight: most drawn bodies are ones the shortcut accepts (so
    an edit in them tests it), and the shapes it leaves to the parse still come."""
    return st.integers(0, 7).flatmap(lambda n: odd if n == 0 else plain)


_part = _mostly(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["input_text", "output_text"]), "text": _text},
        optional={"annotations": st.just([])},
    ),
    st.one_of(
        st.fixed_dictionaries({"type": st.just("refusal"), "refusal": _text}),
        st.fixed_dictionaries({"type": st.just("input_image")}, optional={"image_url": _text}),
        st.fixed_dictionaries({"type": st.just("input_file"), "file_id": _text}),
    ),
)
_content = st.one_of(_text, st.lists(_part, max_size=3))
_texts = st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["summary_text", "reasoning_text"]),
                           "text": _text}),
    max_size=2,
)  # fmt: skip
_item = _mostly(
    st.one_of(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "system", "developer"]),
             "content": _content},
            optional={"type": st.just("message"), "id": _text, "status": st.just("completed")},
        ),
        st.fixed_dictionaries(
            {"type": st.just("function_call"), "call_id": _text, "name": _text,
             "arguments": _text},
            optional={"id": _text, "status": st.just("completed")},
        ),
        st.fixed_dictionaries(
            {"type": st.just("function_call_output"), "call_id": _text, "output": _content}
        ),
        st.fixed_dictionaries(
            {"type": st.just("reasoning")},
            optional={"id": _text, "summary": _texts, "content": _texts,
                      "encrypted_content": _text},
        ),
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["item_reference", "web_search_call"]),
                           "id": _text}),
)  # fmt: skip
_tool = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("function"), "name": _text},
        optional={
            "description": _text,
            "parameters": st.fixed_dictionaries({"type": st.just("object")}),
            "strict": st.booleans(),
        },
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search", "file_search"])}),
)
_tool_choice = st.one_of(
    st.sampled_from(["auto", "none", "required"]),
    st.fixed_dictionaries({"type": st.just("function"), "name": _text}),
    st.fixed_dictionaries({"type": st.just("allowed_tools"), "mode": st.just("auto"),
                           "tools": st.just([{"type": "function", "name": "f"}])}),
)  # fmt: skip
_body = st.fixed_dictionaries(
    {"input": _mostly(st.lists(_item, min_size=1, max_size=5), _text)},
    optional={
        "model": _text,
        "instructions": _text,
        "tools": st.lists(_tool, max_size=3),
        "tool_choice": _tool_choice,
        "parallel_tool_calls": st.booleans(),
        "max_output_tokens": st.integers(0, 9),
        "temperature": st.one_of(st.floats(0, 2), st.integers(0, 2)),
        "top_p": st.floats(0, 1),
        "stream": st.booleans(),
        "user": _text,
        "store": st.booleans(),
        "previous_response_id": _text,
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_body, st.one_of(st.just(0), st.integers(0, 5)))
def test_no_single_edit_of_a_drawn_body_gets_past_the_parse(
    body: dict[str, Any], start: int
) -> None:
    """Every single edit of each drawn body (one drawn edit seldom lands on the one
    place a check guards; see test_messages_plain.py)."""
    for changed in single_edits(body, _JUNK):
        items = changed.get("input")
        at = min(start, len(items)) if isinstance(items, list) else start
        if plainly_valid(changed, at):
            parse_request_body(changed, tolerant=True, start=at)  # must not raise


def _full_body() -> dict[str, Any]:
    """Every field the parse reads, each in its plain form."""
    body = _agent_turn()
    body["input"] += [
        {"role": "developer", "content": [{"type": "input_text", "text": "later"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
        {"type": "function_call_output", "call_id": "call_1",
         "output": [{"type": "input_text", "text": "rows"}]},
        {"role": "user", "content": [{"type": "output_text", "text": "quoted"}]},
    ]  # fmt: skip
    body["tools"].append({"type": "web_search"})
    body.update(
        tool_choice={"type": "function", "name": "search"},
        parallel_tool_calls=False,
        top_p=1,
        user="u",
        stream=False,
    )
    return body


def test_every_single_edit_of_a_full_body() -> None:
    """Exhaustively: each place of a body using every field, given each bad value."""
    body = _full_body()
    assert plainly_valid(body, 0)
    for changed in single_edits(body, _JUNK):
        for start in (0, 5):
            if plainly_valid(changed, start):
                parse_request_body(changed, tolerant=True, start=start)


def _agent_turn() -> dict[str, Any]:
    """What ``client.responses.create`` sends on the second turn of an agent loop that
    feeds ``response.output`` back (see :func:`test_the_sdk_agent_loop_takes_the_shortcut`)."""
    return {
        "model": "m",
        "instructions": "be brief",
        "input": [
            {"role": "system", "content": "be kind"},
            {"role": "user", "content": "find it"},
            {"id": "rs_1", "type": "reasoning", "encrypted_content": "opaque",
             "summary": [{"type": "summary_text", "text": "search first"}]},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "looking", "annotations": []}]},
            {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "search",
             "arguments": '{"q": "x"}', "status": "completed"},
            {"type": "function_call_output", "call_id": "call_1", "output": "rows"},
        ],
        "tools": [{"type": "function", "name": "search", "description": "find",
                   "parameters": {"type": "object"}, "strict": True}],
        "tool_choice": "auto",
        "max_output_tokens": 16,
        "temperature": 0.5,
        "store": False,
    }  # fmt: skip


def test_the_usual_agent_turn_takes_the_shortcut() -> None:
    """The shapes the SDKs send are plain: the shortcut is not dead code."""
    assert plainly_valid(_agent_turn(), 0)
    assert plainly_valid(_agent_turn(), 5)
    assert plainly_valid({"model": "m", "input": "hi"}, 0)
    assert plainly_valid({"model": "m", "input": [], "tool_choice": "required"}, 0)


_RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 0, "model": "m", "status": "completed",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": _agent_turn()["input"][2:5],
    "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
              "input_tokens_details": {"cached_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 0}},
}  # fmt: skip


def test_the_sdk_agent_loop_takes_the_shortcut() -> None:
    """The bodies the ``openai`` SDK itself sends, ``response.output`` fed back, are plain."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=_RESPONSE)

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    client = openai.OpenAI(api_key="k", base_url="http://up.test/v1", http_client=http)
    items: list[Any] = [{"role": "user", "content": "find it"}]
    tools: Any = _agent_turn()["tools"]
    for _ in range(2):
        response = client.responses.create(
            model="m", instructions="be brief", input=items, tools=tools, tool_choice="auto",
            max_output_tokens=16, temperature=0.5, store=False, parallel_tool_calls=False,
        )  # fmt: skip
        items += response.output
        items.append({"type": "function_call_output", "call_id": "call_1", "output": "rows"})
    client.close()
    assert [len(b["input"]) for b in sent] == [1, 5]
    for body in sent:
        assert plainly_valid(body, 0), body


def test_a_plain_body_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``validate_body`` really takes the shortcut (the parse is not run at all)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parsed")

    monkeypatch.setattr(openai_responses, "parse_request_body", refuse)
    body = _agent_turn()
    assert validate_body(body, 2) is body
    with pytest.raises(AssertionError):
        validate_body({"input": [{"type": "item_reference", "id": "x"}]}, 0)


@pytest.mark.parametrize(
    ("edit", "param"),
    [
        (lambda b: b.update(input=5), "input"),
        (lambda b: b["input"].append("hi"), "input[6]"),
        (lambda b: b["input"][4].update(type=None), "input[4].type"),
        (lambda b: b["input"][4].pop("name"), "input[4].name"),
        (lambda b: b["input"][4].pop("type"), "input[4].role"),
        (lambda b: b["input"][5].update(output=None), "input[5].output"),
        (lambda b: b["input"][3]["content"].append({"type": "output_text"}),
         "input[3].content[1].text"),
        (lambda b: b["input"][3]["content"].append({"type": "input_image", "image_url": 1}),
         "input[3].content[1].image_url"),
        (lambda b: b["input"][2]["summary"].append({"text": 1}), "input[2].summary[1].text"),
        (lambda b: b["input"][2].update(encrypted_content=1), "input[2].encrypted_content"),
        (lambda b: b.update(instructions=["be brief"]), "instructions"),
        (lambda b: b.update(max_output_tokens=True), "max_output_tokens"),
        (lambda b: b.update(temperature="0.5"), "temperature"),
        (lambda b: b["tools"][0].update(strict="yes"), "tools[0].strict"),
        (lambda b: b["tools"][0].update(parameters=[]), "tools[0].parameters"),
        (lambda b: b.update(tool_choice={"type": "function", "name": 1}), "tool_choice.name"),
    ],
)  # fmt: skip
def test_what_is_not_plain_is_still_refused_by_name(edit: Any, param: str) -> None:
    body = _agent_turn()
    edit(body)
    assert refused_field(body, plainly_valid, validate_body) == param


@pytest.mark.parametrize(
    "edit",
    [
        lambda b: b["input"].append({"type": "item_reference", "id": "msg_0"}),
        lambda b: b["input"][1].update(
            content=[{"type": "input_image", "image_url": "https://x.test/a.png"}]
        ),
        lambda b: b["input"][3]["content"].append({"type": "refusal", "refusal": "no"}),
        lambda b: b["input"][5].update(output=[{"type": "input_file", "file_id": "f"}]),
        lambda b: b.update(tool_choice=["auto"]),
    ],
)
def test_what_is_not_plain_but_valid_still_passes(edit: Any) -> None:
    """Shapes the shortcut leaves to the parse, which accepts them."""
    body = _agent_turn()
    edit(body)
    assert not plainly_valid(body, 0)
    assert validate_body(body, 0) is body
