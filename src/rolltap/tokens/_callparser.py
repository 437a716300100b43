"""The tool-call parser protocol, its result, the base the built-in parsers share, and
the Hermes parser (see :mod:`rolltap.tokens.parsers`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from rolltap.dialects.canonical import Reasoning, StopReason, Text, Tool, ToolCall
from rolltap.tokens._calljson import Scan, decode_json_at, named_call, skip_space
from rolltap.tokens.reasoning import ReasoningParser, ThinkReasoning

__all__ = [
    "CallParser",
    "HermesParser",
    "ParseResult",
    "TextParser",
    "ToolCallParser",
    "scan_tagged_json",
]

_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"

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


def _reasoned(reasoning: str | None, text: str) -> list[Part]:
    parts: list[Part] = [Reasoning(reasoning)] if reasoning is not None else []
    if text:
        parts.append(Text(text))
    return parts


@dataclass(frozen=True, slots=True)
class CallParser:
    """A reasoning parser, then a family's call scanner (:meth:`scan`); the base of the
    built-in parsers. Subclasses set ``name`` and override :meth:`scan`."""

    name: str = "text"
    reasoning: ReasoningParser = field(default_factory=ThinkReasoning)
    #: the reasoning parser this family's models need unless configured otherwise
    default_reasoning = "think"

    def for_tools(self, tools: Sequence[Tool]) -> CallParser:
        """This parser for a request offering ``tools`` (a family whose calls' values
        are typed by the schemas uses them; the others ignore them)."""
        return self

    def scan(self, text: str) -> Scan:
        """(text outside calls, (name, arguments) per call, problems) of the answer."""
        return [text], [], []

    def joined(self, rest: str, outside: list[str]) -> str:
        """The answer's text when it has no calls (the rest as written, by default)."""
        return rest

    def parse(
        self, text: str, *, finish: StopReason | None = "end_turn", id_prefix: str = "call_"
    ) -> ParseResult:
        """Split off the reasoning, then the calls (see :class:`ToolCallParser`)."""
        reasoning, rest, problems = self.reasoning.split(text)
        if problems:
            return ParseResult((Text(text),), finish, problems)
        outside, calls, problems = self.scan(rest)
        if problems:
            return ParseResult((Text(text),), finish, problems)
        if not calls:
            return ParseResult(tuple(_reasoned(reasoning, self.joined(rest, outside))), finish)
        parts = _reasoned(reasoning, "\n".join(p.strip() for p in outside if p.strip()))
        parts.extend(
            ToolCall(f"{id_prefix}{n}", name, args) for n, (name, args) in enumerate(calls)
        )
        return ParseResult(tuple(parts), "tool_use")


@dataclass(frozen=True, slots=True)
class TextParser(CallParser):
    """No tool calls: reasoning and text."""

    name: str = "text"


def _decode_call(text: str, start: int, number: int) -> tuple[tuple[str, str] | None, int, str]:
    """((name, arguments), the index after the closing tag, problem) from ``start``."""
    what = f"tool call {number}"
    value, end, problem = decode_json_at(text, start, what)
    if problem:
        return None, start, problem
    end = skip_space(text, end)
    if not text.startswith(_CALL_CLOSE, end):
        return None, start, f"{what}: unterminated {_CALL_OPEN}"
    call, problem = named_call(value, what)
    return call, end + len(_CALL_CLOSE), problem


def scan_tagged_json(text: str) -> Scan:
    """``<tool_call>{json}</tool_call>`` calls in ``text``."""
    outside: list[str] = []
    calls: list[tuple[str, str]] = []
    at = 0
    while (opened := text.find(_CALL_OPEN, at)) >= 0:
        outside.append(text[at:opened])
        call, at, problem = _decode_call(text, opened + len(_CALL_OPEN), len(calls))
        if call is None:
            return outside, calls, [problem]
        calls.append(call)
    outside.append(text[at:])
    if any(_CALL_CLOSE in piece for piece in outside):
        return outside, calls, [f"{_CALL_CLOSE} without {_CALL_OPEN}"]
    return outside, calls, []


@dataclass(frozen=True, slots=True)
class HermesParser(CallParser):
    """``<tool_call>{json}</tool_call>`` calls (Hermes, Qwen 2.5/3) plus reasoning."""

    name: str = "hermes"

    def scan(self, text: str) -> Scan:
        """See :func:`scan_tagged_json`."""
        return scan_tagged_json(text)
