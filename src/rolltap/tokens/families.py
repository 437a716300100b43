"""Tool-call parsers for the model families beside Hermes, named as vLLM names them.

Each reads text decoded with special tokens kept, after its reasoning parser, and
follows the family's public format:

``qwen3_coder`` (Qwen3-Coder)
    ``<tool_call><function=NAME><parameter=P>VALUE</parameter>…</function></tool_call>``;
    one newline either side of a value is the template's; a value that reads as JSON
    (``3``, ``true``, ``[1]``, ``{"a": 1}``, ``null``) is that value, any other is a string;
    a parameter the request's tool declares a string stays the text as written.
``llama3_json`` (Llama 3.1–3.3)
    An answer that is a JSON call: ``{"name": N, "parameters": {…}}``, optionally after
    ``<|python_tag|>``; several separated by ``;``. Text that does not start with a
    call (after the tag) is text.
``mistral`` (Mistral, Mixtral, Ministral, Devstral)
    ``[TOOL_CALLS]`` then either a JSON list of calls (older tokenizers) or
    ``NAME[ARGS]{json}`` (tokenizer v11+, ``[CALL_ID]id`` allowed before ``[ARGS]``), the
    latter once per ``[TOOL_CALLS]``; text before the first is text.
``deepseek_v3`` (DeepSeek V3, R1, V3.1)
    ``<｜tool▁calls▁begin｜>`` then calls ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME``
    + a fenced ``json`` block (V3/R1) or ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}``
    (V3.1), each closed by ``<｜tool▁call▁end｜>``, then ``<｜tool▁calls▁end｜>``.
``openai`` (gpt-oss)
    Harmony messages (:mod:`rolltap.tokens.harmony`): ``final`` and preamble messages are
    text, a message ``to=functions.NAME`` a call; reads reasoning with ``harmony``.

>>> from rolltap.tokens.parsers import resolve_parser
>>> resolve_parser("mistral").parse('[TOOL_CALLS]f[ARGS]{"x": 1}').tool_calls[0].arguments
'{"x": 1}'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rolltap.dialects.canonical import Tool
from rolltap.tokens._calljson import (
    DECODER,
    Scan,
    arguments_text,
    checked_name,
    decode_json_at,
    named_call,
    skip_space,
)
from rolltap.tokens._callparser import CallParser
from rolltap.tokens.harmony import scan_harmony
from rolltap.tokens.reasoning import HarmonyReasoning, ReasoningParser

__all__ = [
    "DeepSeekV3Parser", "Llama3JsonParser", "MistralParser", "OpenAIParser",
    "Qwen3CoderParser",
]  # fmt: skip

_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)</parameter>", re.DOTALL)


#: a tool's name → its parameters' declared JSON types (the ``properties`` ``type``s)
Schemas = Mapping[str, Mapping[str, Any]]


def _declared_string(declared: Any) -> bool:
    types = declared if isinstance(declared, list) else [declared]
    return "string" in types


def _value(raw: str, declared: Any) -> object:
    """A Qwen3-Coder parameter value: the text for a parameter declared a string (a
    file's content that happens to be JSON stays text), else JSON when it reads as JSON."""
    text = raw.removeprefix("\n").removesuffix("\n")
    if _declared_string(declared) and text != "null":
        return text
    try:
        return DECODER.decode(text)
    except (ValueError, RecursionError):
        return text


def _types(schemas: Schemas, name: str) -> Mapping[str, Any]:
    properties = schemas.get(name, {}).get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {k: v.get("type") for k, v in properties.items() if isinstance(v, Mapping)}


def _xml_call(inner: str, number: int, schemas: Schemas) -> tuple[tuple[str, str] | None, str]:
    what = f"tool call {number}"
    found = _FUNCTION.fullmatch(inner.strip())
    if found is None:
        return None, f"{what}: no <function=…>…</function>"
    name, problem = checked_name(found.group(1).strip(), what)
    if problem:
        return None, problem
    body = found.group(2)
    types = _types(schemas, name)
    params = {
        (key := m.group(1).strip()): _value(m.group(2), types.get(key))
        for m in _PARAMETER.finditer(body)
    }
    if _PARAMETER.sub("", body).strip():
        return None, f"{what}: text outside the parameters"
    arguments, problem = arguments_text(params, what)
    return ((name, arguments) if not problem else None), problem


def scan_qwen3_coder(text: str, schemas: Schemas | None = None) -> Scan:
    """``<tool_call><function=…>`` calls; ``schemas`` types the values (see :func:`_value`)."""
    outside: list[str] = []
    calls: list[tuple[str, str]] = []
    at = 0
    while (opened := text.find(_CALL_OPEN, at)) >= 0:
        outside.append(text[at:opened])
        closed = text.find(_CALL_CLOSE, opened)
        if closed < 0:
            return outside, calls, [f"tool call {len(calls)}: unterminated {_CALL_OPEN}"]
        inner = text[opened + len(_CALL_OPEN) : closed]
        call, problem = _xml_call(inner, len(calls), schemas or {})
        if call is None:
            return outside, calls, [problem]
        calls.append(call)
        at = closed + len(_CALL_CLOSE)
    outside.append(text[at:])
    if any(_CALL_CLOSE in piece or "<function=" in piece for piece in outside):
        return outside, calls, ["a call outside <tool_call>…</tool_call>"]
    return outside, calls, []


_PYTHON_TAG = "<|python_tag|>"


def scan_llama3_json(text: str) -> Scan:
    """``{"name", "parameters"}`` calls making up the answer, ``;``-separated."""
    before, tagged, after = text.partition(_PYTHON_TAG)
    body, before = (after, before) if tagged else (text, "")
    start = skip_space(body, 0)
    if not body.startswith("{", start):
        if tagged:
            return [before], [], [f"no JSON call after {_PYTHON_TAG}"]
        return [text], [], []
    calls: list[tuple[str, str]] = []
    at = start
    while True:
        what = f"tool call {len(calls)}"
        value, at, problem = decode_json_at(body, at, what)
        if problem:
            return [before], calls, [problem]
        call, problem = named_call(value, what)
        if call is None:
            return [before], calls, [problem]
        calls.append(call)
        at = skip_space(body, at)
        if at == len(body):
            return [before], calls, []
        if body[at] != ";":
            return [before], calls, [f"text after tool call {len(calls) - 1}"]
        at += 1


_MISTRAL_CALLS, _MISTRAL_ARGS, _MISTRAL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"


def _mistral_list(body: str, calls: list[tuple[str, str]]) -> tuple[int, str]:
    value, end, problem = decode_json_at(body, 0, f"tool call {len(calls)}")
    if problem:
        return 0, problem
    if not isinstance(value, list) or not value:
        return 0, f"tool call {len(calls)}: not a list of calls"
    for item in value:
        call, problem = named_call(item, f"tool call {len(calls)}")
        if call is None:
            return 0, problem
        calls.append(call)
    return end, ""


def _mistral_named(body: str, calls: list[tuple[str, str]]) -> tuple[int, str]:
    what = f"tool call {len(calls)}"
    args = body.find(_MISTRAL_ARGS)
    if args < 0:
        return 0, f"{what}: no {_MISTRAL_ARGS}"
    name, problem = checked_name(body[:args].partition(_MISTRAL_ID)[0].strip(), what)
    if problem:
        return 0, problem
    value, end, problem = decode_json_at(body, args + len(_MISTRAL_ARGS), what)
    if problem:
        return 0, problem
    arguments, problem = arguments_text(value, what)
    if problem:
        return 0, problem
    calls.append((name, arguments))
    return end, ""


def scan_mistral(text: str) -> Scan:
    """``[TOOL_CALLS]`` calls, either spelling."""
    pieces = text.split(_MISTRAL_CALLS)
    outside, calls = [pieces[0]], list[tuple[str, str]]()
    for piece in pieces[1:]:
        read = _mistral_list if piece.lstrip().startswith("[") else _mistral_named
        end, problem = read(piece.lstrip(), calls)
        if problem:
            return outside, calls, [problem]
        outside.append(piece.lstrip()[end:])
    return outside, calls, []


_DS_BEGIN, _DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_DS_CALL, _DS_SEP, _DS_CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
_DS_FENCED = re.compile(r"([^\n]*)\n```(?:json)?\n(.*)\n```\s*", re.DOTALL)


def _deepseek_call(inner: str, number: int) -> tuple[tuple[str, str] | None, str]:
    what = f"tool call {number}"
    kind, found, rest = inner.partition(_DS_SEP)
    if not found:
        return None, f"{what}: no {_DS_SEP}"
    fenced = _DS_FENCED.fullmatch(rest) if kind.strip() == "function" else None
    name, body = (fenced.group(1), fenced.group(2)) if fenced else (kind, rest)
    name, problem = checked_name(name.strip(), what)
    if problem:
        return None, problem
    value, end, problem = decode_json_at(body, 0, what)
    if problem:
        return None, problem
    if body[end:].strip():
        return None, f"{what}: text after the arguments"
    arguments, problem = arguments_text(value, what)
    return ((name, arguments) if not problem else None), problem


def scan_deepseek_v3(text: str) -> Scan:
    """``<｜tool▁calls▁begin｜>`` … ``<｜tool▁calls▁end｜>`` calls."""
    before, found, block = text.partition(_DS_BEGIN)
    if not found:
        stray = any(token in text for token in (_DS_CALL, _DS_SEP, _DS_CALL_END, _DS_END))
        return [text], [], ["a DeepSeek call marker outside a call block"] if stray else []
    block, closed, after = block.partition(_DS_END)
    if not closed:
        return [before], [], [f"unterminated {_DS_BEGIN}"]
    calls: list[tuple[str, str]] = []
    pieces = block.split(_DS_CALL)
    if pieces[0].strip() or len(pieces) < 2:
        return [before], [], [f"text in the call block outside {_DS_CALL}"]
    for piece in pieces[1:]:
        inner, ended, trailing = piece.partition(_DS_CALL_END)
        if not ended or trailing.strip():
            return [before], calls, [f"tool call {len(calls)}: unterminated {_DS_CALL}"]
        call, problem = _deepseek_call(inner, len(calls))
        if call is None:
            return [before], calls, [problem]
        calls.append(call)
    return [before, after], calls, []


@dataclass(frozen=True, slots=True)
class Qwen3CoderParser(CallParser):
    """Qwen3-Coder's XML-ish calls (see the module doc)."""

    name: str = "qwen3_coder"
    #: the request's tools' parameter schemas, by tool name (:meth:`for_tools`)
    schemas: Schemas = field(default_factory=dict)

    def for_tools(self, tools: Sequence[Tool]) -> Qwen3CoderParser:
        """This parser typing values by ``tools``' parameter schemas."""
        return replace(self, schemas={tool.name: tool.parameters for tool in tools})

    def scan(self, text: str) -> Scan:
        """See :func:`scan_qwen3_coder`."""
        return scan_qwen3_coder(text, self.schemas)


@dataclass(frozen=True, slots=True)
class Llama3JsonParser(CallParser):
    """Llama 3.x JSON calls (see the module doc)."""

    name: str = "llama3_json"

    def scan(self, text: str) -> Scan:
        """See :func:`scan_llama3_json`."""
        return scan_llama3_json(text)


@dataclass(frozen=True, slots=True)
class MistralParser(CallParser):
    """Mistral ``[TOOL_CALLS]`` calls (see the module doc)."""

    name: str = "mistral"

    def scan(self, text: str) -> Scan:
        """See :func:`scan_mistral`."""
        return scan_mistral(text)


@dataclass(frozen=True, slots=True)
class DeepSeekV3Parser(CallParser):
    """DeepSeek V3 / R1 / V3.1 calls (see the module doc)."""

    name: str = "deepseek_v3"

    def scan(self, text: str) -> Scan:
        """See :func:`scan_deepseek_v3`."""
        return scan_deepseek_v3(text)


@dataclass(frozen=True, slots=True)
class OpenAIParser(CallParser):
    """gpt-oss Harmony messages (see the module doc); its reasoning parser is ``harmony``."""

    name: str = "openai"
    reasoning: ReasoningParser = field(default_factory=HarmonyReasoning)
    default_reasoning = "harmony"

    def scan(self, text: str) -> Scan:
        """See :func:`~rolltap.tokens.harmony.scan_harmony`."""
        return scan_harmony(text)

    def joined(self, rest: str, outside: list[str]) -> str:
        """The text messages' bodies, not their Harmony markup."""
        return "\n".join(piece for piece in outside if piece)
