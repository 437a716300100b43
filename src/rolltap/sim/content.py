"""Deterministic answers: completion words, tool calls, logprobs and usage.

Everything here is a pure function of the request body and the :class:`SimConfig`, so two
simulators with the same seed answer a request identically.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

import orjson

from rolltap.sim.config import SimConfig

__all__ = ["WORDS", "Answer", "BadRequest", "answer_for"]

_WORD_TEXT = """
    the of and to in is that for it as was with be by on not he this are or his from at
    which but have an they you were her she there been one all we their has would when if
    so no will more can out other into than then some could them only time these two may
    first new very after most also made any such where over like our what just about model
    token river stone cloud light green quiet north table paper window garden bright simple
    rapid signal answer number letter orange silver market winter summer valley forest
    engine planet ocean mirror basket bridge castle dragon button candle circle desert
    finger flower guitar hammer island jacket kitten ladder lemon magnet needle pepper
    pillow rocket saddle tunnel violin wallet yellow zebra anchor beacon canyon harbor
    meadow prism quartz ribbon saturn timber velvet walnut glacier lantern marble
"""
WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())


class BadRequest(ValueError):
    """The request body is JSON but not a usable chat-completions request."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the simulated model says for one request (text or one tool call)."""

    model: str
    #: the completion, one word per token; empty for a tool call
    tokens: tuple[str, ...]
    #: one logprob per token when the request asked for logprobs
    logprobs: tuple[float, ...] | None
    tool_name: str | None
    tool_args: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    stream: bool
    include_usage: bool

    @property
    def usage(self) -> dict[str, int]:
        """OpenAI ``usage`` object."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def _messages(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages: required, must be a list")
    for message in messages:
        if not isinstance(message, dict):
            raise BadRequest("messages: every message must be an object")
    return messages


def _text_len(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):  # content parts: count the text ones
        texts = (p.get("text") for p in content if isinstance(p, dict))
        return sum(len(t) for t in texts if isinstance(t, str))
    return 0


def prompt_tokens(messages: list[Any]) -> int:
    """A cheap, deterministic prompt-size estimate: characters // 4 + 1."""
    return sum(_text_len(m.get("content")) for m in messages) // 4 + 1


def _rng(seed: int, messages: list[Any]) -> random.Random:
    digest = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).digest()
    return random.Random(f"{seed}:{digest.hex()}")


def _limit(body: dict[str, Any], config: SimConfig) -> tuple[int, bool]:
    """(completion length, whether the request's max tokens capped it)."""
    caps = [body.get("max_tokens"), body.get("max_completion_tokens")]
    limits = [c for c in caps if isinstance(c, int) and not isinstance(c, bool)]
    if any(c < 0 for c in limits):
        raise BadRequest("max_tokens: must not be negative")
    cap = min(limits, default=config.completion_tokens)
    return min(cap, config.completion_tokens), cap < config.completion_tokens


def _chosen_tool(body: dict[str, Any], messages: list[Any]) -> dict[str, Any] | None:
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if not isinstance(tools, list) or not tools or choice == "none":
        return None
    if messages and messages[-1].get("role") == "tool":
        return None
    candidates = [t.get("function") for t in tools if isinstance(t, dict)]
    functions: list[dict[str, Any]] = [f for f in candidates if isinstance(f, dict)]
    if not functions:
        return None
    named = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(named, dict):  # a named function: use it when it is among the tools
        for fn in functions:
            if fn.get("name") == named.get("name"):
                return dict(fn)
    return dict(functions[0])


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


def answer_for(body: dict[str, Any], config: SimConfig) -> Answer:
    """The deterministic answer to a chat-completions request body."""
    messages = _messages(body)
    n_tokens, capped = _limit(body, config)
    stream_options = body.get("stream_options")
    common: dict[str, Any] = {
        "model": str(body.get("model") or config.model),
        "prompt_tokens": prompt_tokens(messages),
        "stream": body.get("stream") is True,
        "include_usage": isinstance(stream_options, dict)
        and stream_options.get("include_usage") is True,
    }
    tool = _chosen_tool(body, messages)
    if tool is not None:
        name = str(tool.get("name") or "tool")
        args = tool_arguments(tool.get("parameters"))
        return Answer(
            tokens=(),
            logprobs=None,
            tool_name=name,
            tool_args=args,
            finish_reason="tool_calls",
            completion_tokens=(len(name) + len(args)) // 4 + 1,
            **common,
        )
    rng = _rng(config.seed, messages)
    words = [rng.choice(WORDS) for _ in range(n_tokens)]
    tokens = tuple(w if i == 0 else " " + w for i, w in enumerate(words))
    logprobs = None
    if body.get("logprobs") is True:
        logprobs = tuple(-round(rng.random() * 2.0, 4) for _ in tokens)
    return Answer(
        tokens=tokens,
        logprobs=logprobs,
        tool_name=None,
        tool_args="",
        finish_reason="length" if capped else "stop",
        completion_tokens=len(tokens),
        **common,
    )
