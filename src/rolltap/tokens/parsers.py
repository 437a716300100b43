"""Parsing a model's raw completion text into an assistant message: text, reasoning, tool calls.

A token client gets text back from ``/v1/completions``, not a structured message; a
:class:`ToolCallParser` turns that text into canonical parts
(:class:`~rolltap.dialects.canonical.Reasoning`, :class:`~rolltap.dialects.canonical.Text`,
:class:`~rolltap.dialects.canonical.ToolCall`) and a stop reason. Parsers are looked up by
name (:func:`get_parser`); :func:`register_parser` adds one.

Each parser runs a reasoning parser first (:mod:`rolltap.tokens.reasoning`; ``think`` unless
:func:`resolve_parser` is told otherwise), then scans the rest for calls. They read text
decoded with special tokens kept (``[TOOL_CALLS]``, Harmony's markers). Built in, named as
vLLM names them (the other families are in :mod:`rolltap.tokens.families`):

``hermes`` (also ``qwen``)
    Hermes/Qwen style: each call is ``<tool_call>{"name": N, "arguments": {…}}</tool_call>``
    (whitespace around the JSON allowed; ``"parameters"`` is read as ``"arguments"``; a
    call without arguments gets ``{}``), any number of them, with optional text before,
    between or after (joined, stripped). Reasoning as below.
``text``
    No tool calls: reasoning as below, the rest is text.

Reasoning (``think``): one ``<think>…</think>`` block before the answer. A completion
holding ``</think>`` without an opening tag started inside the block (templates such as
Qwen3's put ``<think>`` in the generation prompt): everything before ``</think>`` is
reasoning (see :func:`~rolltap.tokens.reasoning.split_reasoning`).

Malformed output never raises. An unterminated ``<think>`` or call, a stray
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

from collections.abc import Callable
from dataclasses import replace

from rolltap.errors import ConfigError
from rolltap.tokens._callparser import (
    CallParser,
    HermesParser,
    ParseResult,
    TextParser,
    ToolCallParser,
)
from rolltap.tokens.families import (
    DeepSeekV3Parser,
    Llama3JsonParser,
    MistralParser,
    OpenAIParser,
    Qwen3CoderParser,
)
from rolltap.tokens.reasoning import get_reasoning_parser, split_reasoning

__all__ = [
    "CallParser",
    "HermesParser",
    "ParseResult",
    "TextParser",
    "ToolCallParser",
    "get_parser",
    "parser_names",
    "register_parser",
    "resolve_parser",
    "split_reasoning",
]

_FACTORIES: dict[str, Callable[[], ToolCallParser]] = {
    "hermes": HermesParser,
    "qwen": lambda: HermesParser(name="qwen"),
    "text": TextParser,
    "qwen3_coder": Qwen3CoderParser,
    "llama3_json": Llama3JsonParser,
    "mistral": MistralParser,
    "deepseek_v3": DeepSeekV3Parser,
    "openai": OpenAIParser,
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


def resolve_parser(tool_parser: str, reasoning_parser: str | None = None) -> ToolCallParser:
    """The tool parser ``tool_parser`` reading reasoning with ``reasoning_parser`` (None:
    the family's own, ``harmony`` for ``openai``, else ``think``).

    :class:`~rolltap.errors.ConfigError` for unknown names, for a parser that cannot take
    another reasoning parser, and for mixing Harmony with another format.

    >>> resolve_parser("openai").reasoning.name
    'harmony'
    """
    parser = get_parser(tool_parser)
    if not isinstance(parser, CallParser):
        if reasoning_parser is not None:
            raise ConfigError(f"tool parser {tool_parser!r} reads reasoning itself")
        return parser
    wanted = reasoning_parser or parser.default_reasoning
    if "harmony" in (wanted, parser.default_reasoning) and wanted != parser.default_reasoning:
        raise ConfigError(
            "Harmony (gpt-oss) output needs tool_parser 'openai' with reasoning_parser"
            f" 'harmony', not {tool_parser!r} with {wanted!r}"
        )
    return replace(parser, reasoning=get_reasoning_parser(wanted))
