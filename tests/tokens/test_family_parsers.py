"""Tool-call and reasoning parsers per model family, on fixtures written from each public
format: well-formed, truncated, several calls, calls mixed with text, reasoning first."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolltap.dialects.canonical import Reasoning, Text, Tool, ToolCall
from rolltap.errors import ConfigError
from rolltap.tokens.parsers import CallParser, ParseResult, parser_names, resolve_parser
from rolltap.tokens.reasoning import get_reasoning_parser, reasoning_parser_names

A = '{"city": "Paris", "days": 3}'
B = '{"q": "é"}'
# DeepSeek's markers (fullwidth bars, ▁ for spaces), spelled once
DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL, DS_SEP, DS_CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


def _ds_v3(name: str, args: str) -> str:
    return f"{DS_CALL}function{DS_SEP}{name}\n```json\n{args}\n```{DS_CALL_END}"


def _qc(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def _harmony(channel: str, body: str, to: str | None = None, first: bool = False) -> str:
    start = "" if first else "<|start|>assistant"
    header = f"{channel} to={to} <|constrain|>json" if to else channel
    end = "<|call|>" if to else "<|end|>"
    return f"{start}<|channel|>{header}<|message|>{body}{end}"


#: (parser, text, reasoning, text, calls as (name, arguments))
WELL_FORMED: list[tuple[str, str, str | None, str, list[tuple[str, str]]]] = [
    ("qwen3_coder", _qc("weather", city="Paris", days="3"), None, "",
     [("weather", A)]),
    ("qwen3_coder", "<think>\nplan\n</think>\n\nLet me check.\n" + _qc("weather", city="Paris",
     days="3") + "\n" + _qc("search", q="é"), "plan", "Let me check.",
     [("weather", A), ("search", B)]),
    ("qwen3_coder", "no calls here", None, "no calls here", []),
    ("llama3_json", '{"name": "weather", "parameters": ' + A + "}", None, "", [("weather", A)]),
    ("llama3_json", '<|python_tag|>{"name": "weather", "parameters": ' + A
     + '}; {"name": "search", "parameters": ' + B + "}", None, "",
     [("weather", A), ("search", B)]),
    ("llama3_json", "It is sunny.", None, "It is sunny.", []),
    ("llama3_json", "Checking.<|python_tag|>{\"name\": \"search\", \"parameters\": " + B + "}",
     None, "Checking.", [("search", B)]),
    ("mistral", '[TOOL_CALLS][{"name": "weather", "arguments": ' + A + "}]", None, "",
     [("weather", A)]),
    ("mistral", 'Sure.[TOOL_CALLS]weather[ARGS]' + A + "[TOOL_CALLS]search[CALL_ID]a1B2c3D4e"
     "[ARGS]" + B, None, "Sure.", [("weather", A), ("search", B)]),
    ("mistral", "[THINK]x[/THINK]plain", None, "[THINK]x[/THINK]plain", []),
    ("deepseek_v3", f"{DS_BEGIN}{_ds_v3('weather', A)}{DS_END}", None, "", [("weather", A)]),
    ("deepseek_v3", f"<think>hm</think>\n\nOn it.{DS_BEGIN}{_ds_v3('weather', A)}\n"
     f"{DS_CALL}search{DS_SEP}{B}{DS_CALL_END}{DS_END}", "hm", "On it.",
     [("weather", A), ("search", B)]),
    ("deepseek_v3", "hm</think>\n\nThe answer is 4.", "hm", "The answer is 4.", []),
    ("openai", _harmony("analysis", "Need weather.", first=True)
     + _harmony("commentary", A, to="functions.weather"), "Need weather.", "",
     [("weather", A)]),
    ("openai", _harmony("analysis", "Two lookups.", first=True)
     + _harmony("commentary", "Looking both up.")
     + _harmony("commentary", A, to="functions.weather")
     + _harmony("commentary", B, to="functions.search").removesuffix("<|call|>"),
     "Two lookups.", "Looking both up.", [("weather", A), ("search", B)]),
    ("openai", _harmony("analysis", "Easy.", first=True) + _harmony("final", "Four."),
     "Easy.", "Four.", []),
    ("openai", "plain words", None, "plain words", []),
    ("hermes", "<think>a</think>\n\nx\n<tool_call>\n{\"name\": \"weather\", \"arguments\": "
     + A + "}\n</tool_call>", "a", "x", [("weather", A)]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "reasoning", "answer", "calls"), WELL_FORMED)
def test_well_formed_output(
    name: str, text: str, reasoning: str | None, answer: str, calls: list[tuple[str, str]]
) -> None:
    result = resolve_parser(name).parse(text, id_prefix="call_3_")
    assert result.problems == []
    assert (result.reasoning, result.text) == (reasoning, answer)
    assert [(c.name, c.arguments) for c in result.tool_calls] == calls
    assert [c.id for c in result.tool_calls] == [f"call_3_{n}" for n in range(len(calls))]
    assert result.stop_reason == ("tool_use" if calls else "end_turn")
    kinds = [type(p) for p in result.parts]
    assert kinds == sorted(kinds, key=[Reasoning, Text, ToolCall].index)  # canonical order


def test_qwen3_coder_values_read_as_json_else_as_text() -> None:
    text = _qc("f", n="3", flag="true", items='[1, "a"]', none="null", s="line one\nline two")
    (call,) = resolve_parser("qwen3_coder").parse(text).tool_calls
    assert json.loads(call.arguments) == {
        "n": 3, "flag": True, "items": [1, "a"], "none": None, "s": "line one\nline two"
    }  # fmt: skip


def test_qwen3_coder_keeps_values_declared_strings_as_written() -> None:
    text = _qc("write", path="a.json", content='{"a": 1}', n="7", tag="null")
    schema = {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"},
        "n": {"type": ["string", "null"]}, "tag": {"type": "string"},
    }}  # fmt: skip
    parser = resolve_parser("qwen3_coder")
    assert isinstance(parser, CallParser)
    (typed,) = parser.for_tools([Tool("write", parameters=schema)]).parse(text).tool_calls
    assert json.loads(typed.arguments) == {"path": "a.json", "content": '{"a": 1}', "n": "7",
                                           "tag": None}  # fmt: skip
    (untyped,) = parser.for_tools([Tool("other")]).parse(text).tool_calls
    assert json.loads(untyped.arguments)["content"] == {"a": 1}
    assert resolve_parser("hermes").for_tools([Tool("x")]) == resolve_parser("hermes")  # type: ignore[attr-defined]


#: (parser, malformed text, the problem recorded)
MALFORMED = [
    ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=a>\n1\n", "unterminated"),
    ("qwen3_coder", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "no <function="),
    ("qwen3_coder", "<tool_call><function=f><parameter=a>1</parameter>junk</function></tool_call>",
     "text outside the parameters"),
    ("qwen3_coder", "<function=f></function>", "outside <tool_call>"),
    ("qwen3_coder", "<tool_call><function= ></function></tool_call>", "no name"),
    ("llama3_json", '{"name": "f", "parameters": {"a": 1', "invalid JSON"),
    ("llama3_json", '{"parameters": {}}', "no name"),
    ("llama3_json", '{"name": "f", "parameters": {}} and then', "text after tool call 0"),
    ("llama3_json", "<|python_tag|>print(1)", "no JSON call after"),
    ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {"a": ', "invalid JSON"),
    ("mistral", "[TOOL_CALLS]weather", "no [ARGS]"),
    ("mistral", "[TOOL_CALLS][]", "not a list of calls"),
    ("mistral", '[TOOL_CALLS]f[ARGS]"x"', "arguments are not JSON"),
    ("deepseek_v3", f"{DS_BEGIN}{_ds_v3('f', A)}", "unterminated"),
    ("deepseek_v3", f"{DS_BEGIN}{DS_CALL}function{DS_SEP}f\n```json\n{{\"a\"", "unterminated"),
    ("deepseek_v3", f"{DS_BEGIN}{DS_CALL}f{DS_SEP}{{bad}}{DS_CALL_END}{DS_END}", "invalid JSON"),
    ("deepseek_v3", f"text {DS_CALL_END}", "outside a call block"),
    ("deepseek_v3", f"{DS_BEGIN}stray{DS_END}", "outside"),
    ("openai", "<|channel|>analysis<|message|>half a thought<|channel|>", "unterminated"),
    ("openai", _harmony("commentary", '{"a": ', to="functions.f", first=True), "invalid JSON"),
    ("openai", "<|channel|>final", "unterminated Harmony header"),
    ("openai", _harmony("final", "x", first=True) + "junk", "outside a Harmony message"),
    ("openai", "<|start|>assistant<|message|>x", "without a channel"),
    ("hermes", "<tool_call>{\"name\": \"f\"", "invalid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "problem"), MALFORMED)
def test_malformed_output_is_plain_text_with_the_problem(
    name: str, text: str, problem: str
) -> None:
    result = resolve_parser(name).parse(text, finish="max_tokens")
    assert len(result.problems) == 1 and problem in result.problems[0], result.problems
    assert (result.parts, result.stop_reason) == ((Text(text),), "max_tokens")


def test_a_truncated_call_after_good_ones_keeps_none() -> None:
    good = _harmony("commentary", A, to="functions.weather", first=True)
    result = resolve_parser("openai").parse(good + "<|start|>assistant<|channel|>comm")
    assert result.tool_calls == () and result.problems


@pytest.mark.parametrize(
    ("reasoning", "text", "expected"),
    [
        ("think", "<think>a</think>b", ("a", "b", [])),
        ("none", "<think>a</think>b", (None, "<think>a</think>b", [])),
        ("harmony", "no markers", (None, "no markers", [])),
        ("harmony", _harmony("analysis", "x", first=True) + _harmony("analysis", "y"),
         ("x\n\ny", "", [])),
    ],
)  # fmt: skip
def test_reasoning_parsers(reasoning: str, text: str, expected: tuple[Any, ...]) -> None:
    assert get_reasoning_parser(reasoning).split(text) == expected


def test_reasoning_none_leaves_think_as_text() -> None:
    result = resolve_parser("hermes", "none").parse("<think>a</think>b")
    assert result.parts == (Text("<think>a</think>b"),)


def _reasoning_of(tool: str, reasoning: str | None = None) -> str:
    parser = resolve_parser(tool, reasoning)
    assert isinstance(parser, CallParser)
    return parser.reasoning.name


def test_openai_implies_harmony_and_harmony_needs_openai() -> None:
    assert _reasoning_of("openai") == _reasoning_of("openai", "harmony") == "harmony"
    assert _reasoning_of("mistral") == "think"
    for tool, reasoning in [("openai", "think"), ("openai", "none"), ("hermes", "harmony")]:
        with pytest.raises(ConfigError, match="Harmony"):
            resolve_parser(tool, reasoning)
    with pytest.raises(ConfigError, match="unknown reasoning parser 'nope'"):
        resolve_parser("hermes", "nope")
    assert {"think", "harmony", "none"} <= set(reasoning_parser_names())
    families = {"qwen3_coder", "llama3_json", "mistral", "deepseek_v3", "openai"}
    assert families <= set(parser_names())


_TAGS = [
    "<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=a>",
    "</parameter>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", DS_BEGIN, DS_END,
    DS_CALL, DS_SEP, DS_CALL_END, "<|start|>", "<|channel|>", "<|message|>", "<|end|>",
    "<|call|>", "<|return|>", "<|constrain|>", " to=functions.f", "analysis", "final",
    "commentary", "<think>", "</think>", "function", "```json\n",
]  # fmt: skip
_PIECES = st.sampled_from([*_TAGS, "{", "}", '"name"', '"f"', ":", ";", "[", "]", " ", "\n",
                           "1", "NaN"]) | st.text(max_size=8)  # fmt: skip


@given(text=st.lists(_PIECES, max_size=14).map("".join))
def test_any_text_parses_without_raising(text: str) -> None:
    for tool in parser_names():
        for reasoning in (None, "none", "think", "harmony"):
            try:
                parser = resolve_parser(tool, reasoning)
            except ConfigError:
                continue  # a combination that is refused up front
            result = parser.parse(text)
            assert isinstance(result, ParseResult)
            if result.problems:
                assert result.parts == (Text(text),)
            assert (result.stop_reason == "tool_use") is bool(result.tool_calls)


_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,11}", fullmatch=True)
_SCALAR = st.none() | st.booleans() | st.integers() | st.text(max_size=6)
_VALUES = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=5,
)
_KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
_CALLS = st.lists(st.tuples(_NAMES, st.dictionaries(_KEYS, _VALUES, max_size=3)), min_size=1,
                  max_size=3, unique_by=lambda call: call[0])  # fmt: skip


def _write(family: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """Calls written as each family's template writes them."""
    dumped = [(name, json.dumps(args, ensure_ascii=False)) for name, args in calls]
    if family == "llama3_json":
        return "; ".join(f'{{"name": "{n}", "parameters": {a}}}' for n, a in dumped)
    if family == "mistral":
        return "".join(f"[TOOL_CALLS]{n}[ARGS]{a}" for n, a in dumped)
    if family == "deepseek_v3":
        return DS_BEGIN + "\n".join(_ds_v3(n, a) for n, a in dumped) + DS_END
    if family == "openai":
        analysis = _harmony("analysis", "thinking", first=True)
        return analysis + "".join(_harmony("commentary", a, to=f"functions.{n}") for n, a in dumped)
    values = [
        {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in a.items()}
        for _, a in calls
    ]
    return "\n".join(_qc(name, **v) for (name, _), v in zip(calls, values, strict=True))


@pytest.mark.parametrize("family", ["qwen3_coder", "llama3_json", "mistral", "deepseek_v3",
                                    "openai"])  # fmt: skip
@given(calls=_CALLS)
def test_written_calls_read_back(family: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
    parser = resolve_parser(family)
    assert isinstance(parser, CallParser)
    if family == "qwen3_coder":  # string values stay text only where the schema says so
        # a text value holding a tag, or spelled "null", is not written back as itself
        calls = [
            (n, {k: v for k, v in a.items() if "<" not in str(v) and v != "null"}) for n, a in calls
        ]
        tools = [
            Tool(name, parameters={"properties": {
                k: {"type": "string" if isinstance(v, str) else "object"} for k, v in a.items()
            }})
            for name, a in calls
        ]  # fmt: skip
        parser = parser.for_tools(tools)
    result = parser.parse(_write(family, calls))
    assert result.problems == []
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == calls
