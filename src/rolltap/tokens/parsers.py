"""Parsing a model's raw completion text into an assistant message: text, reasoning, tool calls.

A token client gets text back from ``/v1/completions``, not a structured message; a
:class:`ToolCallParser` turns that text into canonical parts
(:class:`~rolltap.dialects.canonical.Reasoning`, :class:`~rolltap.dialects.canonical.Text`,
:class:`~rolltap.dialects.canonical.ToolCall`) and a stop reason. Parsers are looked up by
name (:func:`get_parser`); :func:`register_parser` adds one.

Built in:

``hermes`` (also ``qwen``)
    Hermes/Qwen style: each call is ``<tool_call>{"name": N, "arguments": {…}}</tool_call>``
    (whitespace around the JSON allowed; ``"parameters"`` is read as ``"arguments"``; a
    call without arguments gets ``{}``), any number of them, with optional text before,
    between or after (joined, stripped). Reasoning as below.
``text``
    No tool calls: reasoning as below, the rest is text.

Reasoning: one ``<think>…</think>`` block before the answer. A completion holding
``</think>`` without an opening tag started inside the block (templates such as Qwen3's put
``<think>`` in the generation prompt): everything before ``</think>`` is reasoning. The
reasoning is stripped of surrounding newlines, the answer after it of leading ones, as
chat templates do when they render them back.

Malformed output never raises. An unterminated ``<think>`` or ``<tool_call>``, a stray
closing tag, invalid JSON, a call that is not an object or lacks a string ``name``, or
arguments that are not an object: each is described in :attr:`ParseResult.problems`, and
then the whole completion is answered as plain text (no reasoning, no calls), so nothing
the model wrote is lost.

>>> call = '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
>>> result = get_parser("hermes").parse(call)
>>> result.tool_calls, result.stop_reason, result.problems
((ToolCall(id='call_0', name='f', arguments='{"x": 1}', extra={}),), 'tool_use', [])
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rolltap.dialects.canonical import Reasoning, StopReason, Text, ToolCall
from rolltap.errors import ConfigError

__all__ = [
    "HermesParser",
    "ParseResult",
    "TextParser",
    "ToolCallParser",
    "get_parser",
    "parser_names",
    "register_parser",
    "split_reasoning",
]

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"
_NON_SPACE = re.compile(r"\S")


def _no_constants(name: str) -> Any:
    # NaN and Infinity are Python's JSON extensions, not JSON: arguments must stay portable.
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


_DECODER = json.JSONDecoder(parse_constant=_no_constants)

Part = Text | Reasoning | ToolCall


@dataclass(frozen=True, slots=True)
class ParseResult:
    """An assistant message parsed from completion text.

    ``parts`` are in canonical order: reasoning, text, then the tool calls; ``stop_reason``
    is ``tool_use`` when there are calls, else the finish reason given to the parser.
    ``problems`` describes malformed output (then ``parts`` hold the whole text as-is).
    """

    parts: tuple[Part, ...]
    stop_reason: StopReason | None
    problems: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer's text ("" when none)."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def reasoning(self) -> str | None:
        """The reasoning, if the completion had any."""
        found = [p.text for p in self.parts if isinstance(p, Reasoning)]
        return "".join(found) if found else None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The calls, in the order the model wrote them."""
        return tuple(p for p in self.parts if isinstance(p, ToolCall))


@runtime_checkable
class ToolCallParser(Protocol):
    """Turns a completion's text into a :class:`ParseResult`; must never raise on any text."""

    @property
    def name(self) -> str:
        """The name it is registered under."""
        ...

    def parse(
        self, text: str, *, finish: StopReason | None = "end_turn", id_prefix: str = "call_"
    ) -> ParseResult:
        """Parse ``text``; calls get ids ``f"{id_prefix}{n}"``, n counting from 0.

        ``finish`` is the stop reason when there are no calls (the upstream's, mapped:
        ``length`` is ``max_tokens``). Pass an ``id_prefix`` unique to the turn when ids
        must be unique across a conversation.
        """
        ...


def split_reasoning(text: str) -> tuple[str | None, str, list[str]]:
    """(reasoning, the rest, problems) of a completion; see the module docstring."""
    close = text.find(_THINK_CLOSE)
    opened = text.find(_THINK_OPEN)
    if close < 0:
        if opened >= 0:
            return None, text, [f"unterminated {_THINK_OPEN} at character {opened}"]
        return None, text, []
    if 0 <= opened < close:
        before, inside = text[:opened], text[opened + len(_THINK_OPEN) : close]
        if before.strip():
            return None, text, [f"text before {_THINK_OPEN}"]
    else:
        inside = text[:close]  # the generation prompt opened the block
    rest = text[close + len(_THINK_CLOSE) :]
    if _THINK_OPEN in rest or _THINK_CLOSE in rest:
        return None, text, ["more than one reasoning block"]
    return inside.strip("\n"), rest.lstrip("\n"), []


def _reasoned(reasoning: str | None, text: str) -> list[Part]:
    parts: list[Part] = [Reasoning(reasoning)] if reasoning is not None else []
    if text:
        parts.append(Text(text))
    return parts


@dataclass(frozen=True, slots=True)
class TextParser:
    """No tool calls: reasoning (see :func:`split_reasoning`) and text."""

    name: str = "text"

    def parse(
        self, text: str, *, finish: StopReason | None = "end_turn", id_prefix: str = "call_"
    ) -> ParseResult:
        """Split off the reasoning; the rest is text (see :class:`ToolCallParser`)."""
        reasoning, rest, problems = split_reasoning(text)
        return ParseResult(tuple(_reasoned(reasoning, rest)), finish, problems)


def _arguments(call: dict[str, Any], number: int) -> tuple[str, str]:
    """(arguments as JSON text, "") of one decoded call, or ("", the problem)."""
    arguments = call.get("arguments", call.get("parameters", {}))
    if isinstance(arguments, str):
        try:  # some models write the arguments as a JSON string
            arguments = _DECODER.decode(arguments)
        except (ValueError, RecursionError):
            return "", f"tool call {number}: arguments are not JSON"
    if not isinstance(arguments, dict):
        return "", f"tool call {number}: arguments are not an object"
    # json.dumps's default spacing and ensure_ascii=False are what chat templates' tojson
    # writes, so a call rendered back into the next prompt reads as the model wrote it.
    text = json.dumps(arguments, ensure_ascii=False)
    # A JSON escape of a lone surrogate cannot be stored as UTF-8: keep it escaped.
    return (text if _is_utf8(text) else json.dumps(arguments)), ""


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _skip_space(text: str, at: int) -> int:
    found = _NON_SPACE.search(text, at)
    return found.start() if found else len(text)


def _decode_call(text: str, start: int, number: int) -> tuple[dict[str, Any] | None, int, str]:
    """(the call object, the index after its closing tag, problem) from ``start``."""
    try:
        call, end = _DECODER.raw_decode(text, _skip_space(text, start))
    except json.JSONDecodeError as exc:
        return None, start, f"tool call {number}: invalid JSON ({exc.msg} at character {exc.pos})"
    except (ValueError, RecursionError) as exc:  # over-long numbers, absurd nesting
        return None, start, f"tool call {number}: unreadable JSON ({type(exc).__name__})"
    end = _skip_space(text, end)
    if not text.startswith(_CALL_CLOSE, end):
        return None, start, f"tool call {number}: unterminated {_CALL_OPEN}"
    if not isinstance(call, dict):
        return None, start, f"tool call {number}: not a JSON object"
    return call, end + len(_CALL_CLOSE), ""


def _scan_calls(text: str) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(text outside calls, (name, arguments) per call, problems) of an answer."""
    outside: list[str] = []
    calls: list[tuple[str, str]] = []
    at = 0
    while (opened := text.find(_CALL_OPEN, at)) >= 0:
        outside.append(text[at:opened])
        number = len(calls)
        call, at, problem = _decode_call(text, opened + len(_CALL_OPEN), number)
        if call is None:
            return outside, calls, [problem]
        name = call.get("name")
        if not isinstance(name, str) or not name:
            return outside, calls, [f"tool call {number}: no name"]
        if not _is_utf8(name):
            return outside, calls, [f"tool call {number}: the name is not valid text"]
        arguments, problem = _arguments(call, number)
        if problem:
            return outside, calls, [problem]
        calls.append((name, arguments))
    outside.append(text[at:])
    if any(_CALL_CLOSE in piece for piece in outside):
        return outside, calls, [f"{_CALL_CLOSE} without {_CALL_OPEN}"]
    return outside, calls, []


@dataclass(frozen=True, slots=True)
class HermesParser:
    """``<tool_call>{json}</tool_call>`` calls (Hermes, Qwen 2.5/3) plus reasoning."""

    name: str = "hermes"

    def parse(
        self, text: str, *, finish: StopReason | None = "end_turn", id_prefix: str = "call_"
    ) -> ParseResult:
        """Split off the reasoning, then the calls (see :class:`ToolCallParser`)."""
        reasoning, rest, problems = split_reasoning(text)
        if problems:
            return ParseResult((Text(text),), finish, problems)
        outside, calls, problems = _scan_calls(rest)
        if problems:
            return ParseResult((Text(text),), finish, problems)
        if not calls:
            return ParseResult(tuple(_reasoned(reasoning, rest)), finish)
        parts = _reasoned(reasoning, "\n".join(p.strip() for p in outside if p.strip()))
        parts.extend(
            ToolCall(f"{id_prefix}{n}", name, args) for n, (name, args) in enumerate(calls)
        )
        return ParseResult(tuple(parts), "tool_use")


_FACTORIES: dict[str, Callable[[], ToolCallParser]] = {
    "hermes": HermesParser,
    "qwen": lambda: HermesParser(name="qwen"),
    "text": TextParser,
}


def register_parser(name: str, factory: Callable[[], ToolCallParser]) -> None:
    """Make ``get_parser(name)`` build parsers with ``factory`` (replacing any of that name)."""
    _FACTORIES[name] = factory


def parser_names() -> tuple[str, ...]:
    """The names :func:`get_parser` knows, sorted."""
    return tuple(sorted(_FACTORIES))


def get_parser(name: str) -> ToolCallParser:
    """The parser called ``name``; :class:`~rolltap.errors.ConfigError` for an unknown one."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ConfigError(f"unknown tool-call parser {name!r}; known: {', '.join(parser_names())}")
    return factory()
