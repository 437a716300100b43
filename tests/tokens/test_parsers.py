"""Tool-call parsers: well-formed output round-trips, malformed output is plain text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolltap.dialects.canonical import Reasoning, Text, ToolCall
from rolltap.errors import ConfigError
from rolltap.tokens.parsers import (
    HermesParser,
    ParseResult,
    TextParser,
    ToolCallParser,
    get_parser,
    parser_names,
    register_parser,
)

HERMES = get_parser("hermes")
_TAGS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", '"name"', '"arguments"']
_PIECES = st.sampled_from([*_TAGS, ":", ",", '"f"', "[", "]", " ", "\n", "1", "NaN"]) | st.text()
_NAME = st.text(min_size=1, max_size=12)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=5,
)
_ARGS = st.dictionaries(st.text(max_size=6), _VALUE, max_size=3)
# Text a model writes around calls: no tags, no surrounding whitespace.
_PLAIN = st.text(max_size=20).map(str.strip).filter(lambda t: "<" not in t)


def _call(name: str, arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@given(text=st.lists(_PIECES, max_size=12).map("".join))
def test_any_text_parses_without_raising(text: str) -> None:
    for name in parser_names():
        result = get_parser(name).parse(text)
        assert isinstance(result, ParseResult)
        if result.problems:
            assert result.parts == (Text(text),)
            assert result.stop_reason == "end_turn"
        assert (result.stop_reason == "tool_use") is bool(result.tool_calls)


@given(
    calls=st.lists(st.tuples(_NAME, _ARGS), min_size=1, max_size=4),
    before=_PLAIN,
    reasoning=st.none() | _PLAIN,
)
def test_well_formed_calls_round_trip(
    calls: list[tuple[str, dict[str, Any]]], before: str, reasoning: str | None
) -> None:
    think = "" if reasoning is None else f"<think>\n{reasoning}\n</think>\n\n"
    text = think + before + ("\n\n" if before else "") + "\n".join(_call(*c) for c in calls)
    result = HERMES.parse(text, id_prefix="call_7_")
    assert result.problems == []
    assert result.reasoning == reasoning
    assert result.text == before
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == calls
    assert [c.id for c in result.tool_calls] == [f"call_7_{n}" for n in range(len(calls))]
    assert result.stop_reason == "tool_use"


def test_parts_are_canonical_and_arguments_spaced_like_templates() -> None:
    text = '<think>hm</think>\n\nLet me look.\n<tool_call>{"name":"f","arguments":{"q":"é"}}'
    text += '</tool_call>\n<tool_call> {"name": "g"} </tool_call>\n'
    assert HERMES.parse(text).parts == (
        Reasoning("hm"),
        Text("Let me look."),
        ToolCall("call_0", "f", '{"q": "é"}'),
        ToolCall("call_1", "g", "{}"),
    )


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ('<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call>', '{"a": 1}'),
        ('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', '{"a": 1}'),
        ('<tool_call>{"name": "f", "arguments": {"s": "</tool_call>"}}</tool_call>', None),
        ('<tool_call>{"name": "f", "arguments": {"s": "\\ud800"}}</tool_call>', '{"s": "\\ud800"}'),
    ],
)
def test_argument_spellings(text: str, arguments: str | None) -> None:
    (call,) = HERMES.parse(text).tool_calls
    expected = arguments if arguments is not None else '{"s": "</tool_call>"}'
    assert (call.name, call.arguments) == ("f", expected)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('<tool_call>{"name": "f", "arguments": {}}', "unterminated <tool_call>"),
        ("<tool_call>{not json}</tool_call>", "invalid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "no name"),
        ('<tool_call>{"name": ""}</tool_call>', "no name"),
        ('<tool_call>{"name": 3}</tool_call>', "no name"),
        ('<tool_call>{"name": "\\udc00"}</tool_call>', "not valid text"),
        ('<tool_call>["f"]</tool_call>', "not a JSON object"),
        ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "not an object"),
        ('<tool_call>{"name": "f", "arguments": "{x"}</tool_call>', "not JSON"),
        ('<tool_call>{"name": "f", "arguments": {"x": NaN}}</tool_call>', "invalid JSON"),
        ("<tool_call>" + "[" * 100_000 + "</tool_call>", "unreadable JSON"),
        ("<tool_call>" + "9" * 5000 + "</tool_call>", "unreadable JSON"),
        ('ok</tool_call>', "</tool_call> without <tool_call>"),
        ("<think>never closed", "unterminated <think>"),
        ("<think>a</think>b<think>c</think>", "more than one reasoning block"),
        ("hi <think>a</think>b", "text before <think>"),
    ],
)  # fmt: skip
def test_malformed_output_is_plain_text(text: str, problem: str) -> None:
    result = HERMES.parse(text, finish="max_tokens")
    assert len(result.problems) == 1 and problem in result.problems[0]
    assert (result.parts, result.stop_reason) == ((Text(text),), "max_tokens")


def test_a_good_call_before_a_bad_one_is_not_kept() -> None:
    text = '<tool_call>{"name": "f"}</tool_call><tool_call>{"name": 1}</tool_call>'
    result = HERMES.parse(text)
    assert result.tool_calls == () and result.text == text
    assert result.problems == ["tool call 1: no name"]


@pytest.mark.parametrize(
    ("text", "reasoning", "rest"),
    [
        ("plain", None, "plain"),
        ("<think>\nplan\n</think>\n\nanswer", "plan", "answer"),
        ("plan</think>answer", "plan", "answer"),  # the prompt opened the block
        ("  <think>x</think>", "x", None),
        ("<think></think>", "", None),
    ],
)
def test_reasoning(text: str, reasoning: str | None, rest: str | None) -> None:
    for parser in (HERMES, TextParser()):
        result = parser.parse(text)
        assert (result.reasoning, result.problems) == (reasoning, [])
        assert result.text == (rest or "")
        assert result.stop_reason == "end_turn"


def test_text_parser_leaves_tool_calls_as_text() -> None:
    text = _call("f", {})
    assert TextParser().parse(text).parts == (Text(text),)


def test_empty_completion_has_no_parts() -> None:
    assert HERMES.parse("", finish=None) == ParseResult((), None)


def test_registry() -> None:
    assert {"hermes", "qwen", "text"} <= set(parser_names())
    assert get_parser("qwen").name == "qwen"
    assert isinstance(get_parser("hermes"), ToolCallParser)
    known = "known: deepseek_v3, hermes"
    with pytest.raises(ConfigError, match=f"unknown tool-call parser 'nope'; {known}"):
        get_parser("nope")
    register_parser("custom-test", lambda: HermesParser(name="custom-test"))
    assert get_parser("custom-test").parse(_call("f", {})).tool_calls[0].name == "f"
