"""Reasoning parsers: split a completion's reasoning from the answer that follows it.

A :class:`ReasoningParser` runs before the tool-call parser (:mod:`rolltap.tokens.parsers`):
it takes the completion's text (decoded with special tokens kept) and returns the
reasoning, the rest and any problems. Built in, named as vLLM names them:

``think`` (the default)
    One ``<think>…</think>`` block before the answer (Qwen3, DeepSeek R1/V3.1, most
    open reasoning models). ``</think>`` without an opening tag: the generation prompt
    opened the block, everything before it is reasoning.
``harmony``
    gpt-oss's Harmony channels: every ``analysis`` message is reasoning; the other
    messages (``commentary``, ``final``) are the rest, still in Harmony syntax, for the
    ``openai`` tool parser (:mod:`rolltap.tokens.harmony`).
``none``
    No reasoning: the whole text is the answer.

>>> get_reasoning_parser("think").split("<think>\\nhm\\n</think>\\n\\nhi")
('hm', 'hi', [])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rolltap.errors import ConfigError
from rolltap.tokens.harmony import split_harmony

__all__ = [
    "HarmonyReasoning",
    "NoReasoning",
    "ReasoningParser",
    "ThinkReasoning",
    "get_reasoning_parser",
    "reasoning_parser_names",
    "register_reasoning_parser",
    "split_reasoning",
]

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


@runtime_checkable
class ReasoningParser(Protocol):
    """Splits reasoning off a completion; must never raise on any text."""

    @property
    def name(self) -> str:
        """The name it is registered under."""
        ...

    def split(self, text: str) -> tuple[str | None, str, list[str]]:
        """(reasoning or None, the rest, problems); with problems the caller keeps the
        whole text as plain text."""
        ...


def split_reasoning(text: str) -> tuple[str | None, str, list[str]]:
    """``<think>`` reasoning: (reasoning, the rest, problems) of a completion.

    The reasoning is stripped of surrounding newlines, the answer after it of leading
    ones, as chat templates do when they render them back.
    """
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


@dataclass(frozen=True, slots=True)
class ThinkReasoning:
    """``<think>…</think>`` (see :func:`split_reasoning`)."""

    name: str = "think"

    def split(self, text: str) -> tuple[str | None, str, list[str]]:
        """See :class:`ReasoningParser`."""
        return split_reasoning(text)


@dataclass(frozen=True, slots=True)
class HarmonyReasoning:
    """gpt-oss ``analysis`` channel messages (see :mod:`rolltap.tokens.harmony`)."""

    name: str = "harmony"

    def split(self, text: str) -> tuple[str | None, str, list[str]]:
        """See :class:`ReasoningParser`."""
        return split_harmony(text)


@dataclass(frozen=True, slots=True)
class NoReasoning:
    """The model does not reason: everything is the answer."""

    name: str = "none"

    def split(self, text: str) -> tuple[str | None, str, list[str]]:
        """See :class:`ReasoningParser`."""
        return None, text, []


_FACTORIES: dict[str, Callable[[], ReasoningParser]] = {
    "think": ThinkReasoning,
    "harmony": HarmonyReasoning,
    "none": NoReasoning,
}


def register_reasoning_parser(name: str, factory: Callable[[], ReasoningParser]) -> None:
    """Make ``get_reasoning_parser(name)`` build parsers with ``factory``."""
    _FACTORIES[name] = factory


def reasoning_parser_names() -> tuple[str, ...]:
    """The names :func:`get_reasoning_parser` knows, sorted."""
    return tuple(sorted(_FACTORIES))


def get_reasoning_parser(name: str) -> ReasoningParser:
    """The reasoning parser ``name``; :class:`~rolltap.errors.ConfigError` for an unknown one."""
    factory = _FACTORIES.get(name)
    if factory is None:
        known = ", ".join(reasoning_parser_names())
        raise ConfigError(f"unknown reasoning parser {name!r}; known: {known}")
    return factory()
