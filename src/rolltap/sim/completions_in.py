"""Token-level answers for the token routes (``/v1/completions``, llama.cpp's ``/completion``).

A request is reduced to a :class:`TokenPrompt` (prompt ids in :data:`~rolltap.sim.vocab.VOCAB`
and the sampling settings) and answered with a :class:`TokenAnswer`, a pure function of
the prompt ids, the settings and :attr:`SimConfig.seed`:

* **Text**: ``completion_tokens`` words drawn from a RNG seeded by the prompt ids (a word,
  then space-prefixed words: one id each), then the end-of-sequence id ``<|im_end|>``.
* **Tool call**: when the prompt holds :attr:`SimConfig.tool_marker` (default ``<tools>``)
  and no ``<tool_response>`` follows its last occurrence, the completion is
  ``<tool_call>\\n{"name": N, "arguments": A}\\n</tool_call>`` then ``<|im_end|>``. N and
  the parameters' schema come from the first JSON line after the marker that names a
  tool (``{"name": …}`` or ``{"type": "function", "function": {…}}``, as Qwen/Hermes
  chat templates list tools between ``<tools>`` and ``</tools>``); A is built from that
  schema like the chat route's arguments. Without one: ``"tool"`` and ``{}``.
* **Reasoning**: with :attr:`SimConfig.reasoning_tokens`, either opens with that many
  words in ``<think>\n…\n</think>\n\n``.
* **Stop strings** end the text before the first one found (the ids keep the token that
  completed it; ``stop_reason`` names it). **max_tokens** caps the ids, the end-of-sequence
  id included, and then the finish reason is ``length``.
* **Logprobs**: one per completion id, drawn from a second seeded RNG.
* **Continuations**: a prompt that ends with the start of the text answer to the prompt
  before it (after its last id that is not a word: an aborted generation sent again with
  the ids it had, as a token client continues one) is answered with the rest of that
  answer, its logprobs too, as a model finishes what it began; cut and continued, a
  completion's ids are the uncut one's. (Answers that open with reasoning or call a tool
  are answered afresh.)
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from rolltap.sim.config import SimConfig
from rolltap.sim.content import BadRequest, tool_arguments
from rolltap.sim.prefix import PromptTokens, token_bytes
from rolltap.sim.vocab import VOCAB
from rolltap.sim.words import WORDS

__all__ = [
    "MAX_LOGPROBS",
    "TokenAnswer",
    "TokenPrompt",
    "answer_tokens",
    "cache_tokens",
    "cut_short",
    "prompt_ids",
    "stop_strings",
    "text_pieces",
]

#: the most top logprobs a request may ask for (vLLM's default ``max_logprobs``)
MAX_LOGPROBS = 20
#: ids below this are words (``WORDS[i]`` or ``" " + WORDS[i]``, see the vocabulary)
_WORD_IDS = 2 * len(WORDS)
(_TOOL_RESPONSE,) = VOCAB.encode("<tool_response>")
(_TOOLS_END,) = VOCAB.encode("</tools>")


@dataclass(frozen=True, slots=True)
class TokenPrompt:
    """A token-route request reduced to what its answer depends on."""

    model: str
    ids: tuple[int, ...]
    #: the request's cap on completion tokens (``None``: the configured length + EOS)
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TokenAnswer:
    """What the simulated model generates for one :class:`TokenPrompt`."""

    model: str
    prompt_ids: tuple[int, ...]
    #: the sampled ids, the end-of-sequence id included when generation ended naturally
    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    #: the completion text: control tokens left out, cut before a stop string
    text: str
    #: ``abort``: the engine aborted the generation (:func:`cut_short`)
    finish: Literal["stop", "length", "abort"]
    #: the stop string that ended the text, if one did
    stop_reason: str | None


def prompt_ids(prompt: Any, field: str = "prompt") -> tuple[int, ...]:
    """The token ids of a request's prompt: a list of ids, a string (encoded), or a
    one-element list of either. Raises :class:`BadRequest` naming ``field``."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        ids = tuple(VOCAB.encode(prompt))
    elif isinstance(prompt, list) and all(type(i) is int for i in prompt):
        ids = tuple(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
        raise BadRequest(f"{field}: the simulator takes one prompt per request")
    else:
        raise BadRequest(f"{field}: required, a string or a list of token ids")
    if not ids:
        raise BadRequest(f"{field}: must not be empty")
    bad = next((i for i in ids if not 0 <= i < len(VOCAB)), None)
    if bad is not None:
        raise BadRequest(f"{field}: token id {bad} is out of the vocabulary (0..{len(VOCAB) - 1})")
    return ids


def cache_tokens(prompt: TokenPrompt, config: SimConfig) -> PromptTokens:
    """A token request's ids for the prefix cache: the prompt, then the sampled ids."""
    return PromptTokens(token_bytes(prompt.ids), token_bytes(answer_tokens(prompt, config).ids))


def stop_strings(value: Any, field: str = "stop") -> tuple[str, ...]:
    """A request's stop strings: a string, a list of strings, or nothing."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise BadRequest(f"{field}: expected a string or a list of strings")


def text_pieces(answer: TokenAnswer) -> list[str]:
    """The text each completion id adds, in order; the pieces join to ``answer.text``.

    A character split over byte tokens belongs to the piece of its last byte, control
    tokens add nothing, and a stop string empties the pieces from where it starts.
    """
    decoder = VOCAB.decoder()
    raw = [decoder.decode([token_id]) for token_id in answer.ids]
    if raw:
        raw[-1] += decoder.decode([], final=True)
    pieces, left = [], len(answer.text)
    for piece in raw:
        pieces.append(piece[:left])
        left -= len(pieces[-1])
    return pieces


def cut_short(answer: TokenAnswer, tokens: int) -> TokenAnswer:
    """``answer`` aborted after its first ``tokens`` ids: their text, finish ``abort``."""
    text = "".join(text_pieces(answer)[:tokens])
    return replace(answer, ids=answer.ids[:tokens], logprobs=answer.logprobs[:tokens],
                   text=text, finish="abort", stop_reason=None)  # fmt: skip


def _digest(ids: tuple[int, ...]) -> str:
    """What a prompt's draws are seeded with, and its recent answer found by."""
    return hashlib.sha256(orjson.dumps(ids)).hexdigest()


def _rng(seed: int, what: str, digest: str) -> random.Random:
    return random.Random(f"{seed}:{what}:{digest}")


def _wants_tool(ids: tuple[int, ...], config: SimConfig) -> int | None:
    """The index of the marker that asks for a tool call, if the prompt asks for one."""
    marker = VOCAB.id_of(config.tool_marker) if config.tool_marker is not None else None
    if marker is None or marker not in ids:
        return None
    last = len(ids) - 1 - ids[::-1].index(marker)
    return None if _TOOL_RESPONSE in ids[last:] else last


def _tool_listed(ids: tuple[int, ...]) -> tuple[str, Any]:
    """The name and parameter schema of the first tool listed in ``ids``."""
    end = ids.index(_TOOLS_END) if _TOOLS_END in ids else len(ids)
    for line in VOCAB.decode(ids[:end]).splitlines():
        try:
            listed = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        function = listed.get("function", listed) if isinstance(listed, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(function, dict) and isinstance(name, str) and name:
            return name, function.get("parameters")
    return "tool", None


def _reasoning(config: SimConfig, digest: str) -> str:
    if not config.reasoning_tokens:
        return ""
    rng = _rng(config.seed, "reasoning", digest)
    words = " ".join(rng.choice(WORDS) for _ in range(config.reasoning_tokens))
    return f"<think>\n{words}\n</think>\n\n"


def _content(prompt: TokenPrompt, config: SimConfig, digest: str) -> list[int]:
    reasoning = _reasoning(config, digest)
    marker = _wants_tool(prompt.ids, config)
    if marker is not None:
        name, parameters = _tool_listed(prompt.ids[marker + 1 :])
        call = {"name": name, "arguments": orjson.loads(tool_arguments(parameters))}
        # json, not orjson: spaced like a model writes it (``{"name": "f", …}``)
        text = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        return [*VOCAB.encode(reasoning + text), VOCAB.eos]
    rng = _rng(config.seed, "words", digest)
    words = [rng.choice(WORDS) for _ in range(config.completion_tokens)]
    # Whole words encode to one id each: a word, then space-prefixed words.
    return [*VOCAB.encode(reasoning + " ".join(words)), VOCAB.eos]


def _cut_at_stop(
    ids: tuple[int, ...], stops: tuple[str, ...]
) -> tuple[tuple[int, ...], str, str | None]:
    """(ids up to the token completing the first stop string, the text before it, it)."""
    if not any(stops):
        return ids, VOCAB.decode(ids), None
    decoder = VOCAB.decoder()
    text = ""
    for n, token_id in enumerate(ids, 1):
        text += decoder.decode([token_id])
        hits = [(text.find(s), s) for s in stops if s and s in text]
        if hits:
            at, stop = min(hits)
            return ids[:n], text[:at], stop
    return ids, text + decoder.decode([], final=True), None


Drawn = tuple[tuple[int, ...], tuple[float, ...]]


def _drawn(prompt: TokenPrompt, config: SimConfig) -> Drawn:
    """The uncapped answer ids and their logprobs: drawn for the prompt, or the rest of
    the answer the prompt continues."""
    ids = prompt.ids
    k = len(ids)
    while k > 0 and ids[k - 1] < _WORD_IDS:
        k -= 1
    if 0 < k < len(ids):  # it ends with words after a non-word: maybe an answer's start
        first, logprobs = _drawn_for(ids[:k], prompt.model, config)
        n = len(ids) - k
        if n < len(first) and first[:n] == ids[k:]:
            return first[n:], logprobs[n:]
    return _drawn_for(ids, prompt.model, config)


# The answers drawn lately, by what they depend on: the prompt a continuation continues
# was answered moments before (the engine aborted that answer), so its answer is found
# here rather than drawn again (a 2,000-word answer takes milliseconds to draw, and an
# update continues every generation in flight at once). Bounded: the least recent go; a
# prompt is kept as its digest (prompts can be 100k ids).
_RECENT: OrderedDict[tuple[object, ...], Drawn] = OrderedDict()
_RECENT_MAX = 256


def _drawn_for(ids: tuple[int, ...], model: str, config: SimConfig) -> Drawn:
    digest = _digest(ids)  # once: the key and every draw's seed
    key = (digest, config.seed, config.completion_tokens, config.reasoning_tokens,
           config.tool_marker)  # fmt: skip
    if (hit := _RECENT.get(key)) is not None:
        _RECENT.move_to_end(key)
        return hit
    drawn = tuple(_content(TokenPrompt(model, ids), config, digest))
    rng = _rng(config.seed, "logprobs", digest)
    _RECENT[key] = found = drawn, tuple(-round(rng.random() * 2.0, 4) for _ in drawn)
    if len(_RECENT) > _RECENT_MAX:
        _RECENT.popitem(last=False)
    return found


def answer_tokens(prompt: TokenPrompt, config: SimConfig) -> TokenAnswer:
    """The deterministic answer to a token-route request."""
    drawn, logprobs = _drawn(prompt, config)
    if prompt.max_tokens is not None:
        drawn = drawn[: prompt.max_tokens]
    ids, text, stop = _cut_at_stop(drawn, prompt.stop)
    natural = stop is None and bool(ids) and ids[-1] == VOCAB.eos
    return TokenAnswer(
        model=prompt.model,
        prompt_ids=prompt.ids,
        ids=ids,
        logprobs=logprobs[: len(ids)],
        text=text,
        finish="stop" if natural or stop is not None else "length",
        stop_reason=stop,
    )
