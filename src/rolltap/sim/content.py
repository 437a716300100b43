"""Deterministic answers, whatever the dialect: completion words, tool calls and usage.

Each dialect reduces its request body to a :class:`Prompt`; :func:`answer_for` turns that
into an :class:`Answer`. Both are pure functions of the body and the :class:`SimConfig`, so
two simulators with the same seed answer a request identically. The conversation is
normalized to ``(role, text)`` turns, so the same conversation sent on any route (the
same texts, tool calls and tool results) gets the same words and the same token counts.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from rolltap.errors import InvalidRequestError
from rolltap.sim.config import SimConfig
from rolltap.sim.script import ScriptTurn, ToolCall
from rolltap.sim.words import WORDS

__all__ = [
    "Answer",
    "BadRequest",
    "Prompt",
    "Stop",
    "Tool",
    "Turn",
    "answer_for",
    "call_turn",
    "cut_short",
    "text_of",
    "tool_arguments",
]


#: One conversation entry, ``(role, text)``. Roles: ``system``, ``user``, ``assistant``,
#: ``tool`` (a tool result) and ``call`` (a tool call: text is ``NAME\\nARGUMENTS``).
Turn = tuple[str, str]
#: Why generation ended, before a dialect names it (``stop``/``end_turn``/``completed`` …);
#: ``abort``: the engine aborted it (:mod:`rolltap.sim.weights`).
Stop = Literal["end", "max_tokens", "tool_call", "stop_sequence", "abort"]


class BadRequest(InvalidRequestError):
    """The simulator's: a request body that is JSON but not a usable request for its route
    (the simulator answers it ``400 invalid_request``)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the client offers: its name and JSON-schema parameters."""

    name: str
    parameters: Any


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request reduced to what its answer depends on, whatever its dialect."""

    model: str
    turns: tuple[Turn, ...]
    tools: tuple[Tool, ...] = ()
    #: ``False`` when the request's tool choice is "none"
    tools_allowed: bool = True
    #: the tool the request names in its tool choice, if any
    forced_tool: str | None = None
    #: the request's cap on completion tokens (``None``: the configured length)
    max_tokens: int | None = None
    stop_sequences: tuple[str, ...] = ()
    logprobs: bool = False
    stream: bool = False

    @property
    def prompt_tokens(self) -> int:
        """A cheap, deterministic prompt-size estimate: characters // 4 + 1.

        Counts every turn's text but tool calls', like the chat route always has.
        """
        return sum(len(text) for role, text in self.turns if role != "call") // 4 + 1


@dataclass(frozen=True, slots=True)
class Answer:
    """What the simulated model says for one request: text, tool calls, or (scripted) both,
    the text first."""

    model: str
    #: the completion, one word per token; empty for a generated tool call
    tokens: tuple[str, ...]
    #: one logprob per token when the request asked for logprobs
    logprobs: tuple[float, ...] | None
    #: the tool calls, in order (a generated answer has at most one)
    calls: tuple[ToolCall, ...]
    stop: Stop
    #: the stop sequence that ended the text, when ``stop == "stop_sequence"``
    stop_sequence: str | None
    prompt_tokens: int
    completion_tokens: int
    stream: bool

    @property
    def text(self) -> str:
        """The whole completion text."""
        return "".join(self.tokens)

    @property
    def tool_name(self) -> str | None:
        """The first call's tool, ``None`` without a call."""
        return self.calls[0].name if self.calls else None

    @property
    def tool_args(self) -> str:
        """The first call's arguments (JSON), ``""`` without a call."""
        return self.calls[0].arguments if self.calls else ""


def cut_short(answer: Answer, tokens: int) -> Answer:
    """``answer`` aborted after its first ``tokens`` tokens: the text so far, no tool call
    (a call is written after the text, whole)."""
    kept = answer.tokens[:tokens]
    logprobs = None if answer.logprobs is None else answer.logprobs[:tokens]
    return replace(answer, tokens=kept, logprobs=logprobs, calls=(), stop="abort",
                   stop_sequence=None, completion_tokens=len(kept))  # fmt: skip


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the ``text`` of its content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts or blocks: keep the text ones
        texts = (p.get("text") for p in content if isinstance(p, dict))
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def call_turn(name: Any, arguments: Any) -> Turn:
    """The turn for a tool call; arguments (a JSON string or an object) are re-serialized
    with sorted keys so every dialect's spelling of one call reads the same."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return ("call", f"{name}\n{arguments}")
    text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return ("call", f"{name}\n{text}")


def tool_arguments(parameters: Any) -> str:
    """JSON arguments built from a JSON schema's properties: "x", 1, true or null."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    args: dict[str, Any] = {}
    for name, schema in (props or {}).items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "string":
            args[name] = "x"
        elif kind in ("integer", "number"):
            args[name] = 1
        elif kind == "boolean":
            args[name] = True
        else:
            args[name] = None
    return orjson.dumps(args).decode()


def _rng(seed: int, turns: tuple[Turn, ...]) -> random.Random:
    # Empty texts are left out: dialects differ on whether an empty system prompt or
    # an assistant turn holding only tool calls has a text at all.
    key = [turn for turn in turns if turn[1] or turn[0] == "tool"]
    digest = hashlib.sha256(orjson.dumps(key)).digest()
    return random.Random(f"{seed}:{digest.hex()}")


def _chosen_tool(prompt: Prompt) -> Tool | None:
    """The first tool (or the named one), unless tools are off or a tool result was last."""
    if not prompt.tools or not prompt.tools_allowed:
        return None
    if prompt.turns and prompt.turns[-1][0] == "tool":
        return None
    for tool in prompt.tools:
        if tool.name == prompt.forced_tool:
            return tool
    return prompt.tools[0]


def _cut_at_stop(tokens: tuple[str, ...], stops: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """The tokens before the earliest stop sequence, and that sequence ("" when none)."""
    text = "".join(tokens)
    hits = [(text.find(stop), stop) for stop in stops if stop and stop in text]
    if not hits:
        return tokens, ""
    at, stop = min(hits)
    kept: list[str] = []
    length = 0
    for token in tokens:
        if length + len(token) > at:
            if at > length:
                kept.append(token[: at - length])
            break
        kept.append(token)
        length += len(token)
    return tuple(kept), stop


# A scripted text's tokens: each word with the spaces before it (and trailing spaces).
_PIECES = re.compile(r"\s*\S+|\s+")


def _scripted(prompt: Prompt, turn: ScriptTurn, common: dict[str, Any]) -> Answer:
    """The answer a script gives: its text and calls, whatever the request's tools and caps."""
    tokens = tuple(_PIECES.findall(turn.text))
    called = sum((len(c.name) + len(c.arguments)) // 4 + 1 for c in turn.calls)
    return Answer(
        tokens=tokens,
        logprobs=tuple(0.0 for _ in tokens) if prompt.logprobs else None,
        calls=turn.calls,
        stop="tool_call" if turn.calls else "end",
        stop_sequence=None,
        completion_tokens=len(tokens) + called,
        **common,
    )


def answer_for(prompt: Prompt, config: SimConfig, turn: ScriptTurn | None = None) -> Answer:
    """The deterministic answer to a request; ``turn``: the script's, said as it is."""
    common: dict[str, Any] = {
        "model": prompt.model,
        "prompt_tokens": prompt.prompt_tokens,
        "stream": prompt.stream,
    }
    if turn is not None:
        return _scripted(prompt, turn, common)
    tool = _chosen_tool(prompt)
    if tool is not None:
        args = tool_arguments(tool.parameters)
        return Answer(
            tokens=(),
            logprobs=None,
            calls=(ToolCall(tool.name, args),),
            stop="tool_call",
            stop_sequence=None,
            completion_tokens=(len(tool.name) + len(args)) // 4 + 1,
            **common,
        )
    cap = config.completion_tokens if prompt.max_tokens is None else prompt.max_tokens
    rng = _rng(config.seed, prompt.turns)
    words = [rng.choice(WORDS) for _ in range(min(cap, config.completion_tokens))]
    tokens = tuple(w if i == 0 else " " + w for i, w in enumerate(words))
    logprobs = None
    if prompt.logprobs:
        logprobs = tuple(-round(rng.random() * 2.0, 4) for _ in tokens)
    tokens, stop_sequence = _cut_at_stop(tokens, prompt.stop_sequences)
    stop: Stop = "end"
    if stop_sequence:
        stop = "stop_sequence"
        logprobs = logprobs[: len(tokens)] if logprobs is not None else None
    elif cap < config.completion_tokens:
        stop = "max_tokens"
    return Answer(
        tokens=tokens,
        logprobs=logprobs,
        calls=(),
        stop=stop,
        stop_sequence=stop_sequence or None,
        completion_tokens=len(tokens),
        **common,
    )
