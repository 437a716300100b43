"""Simulator configuration and the fault grammar.

A fault spec is ``KIND[=ARG][@PROB]``:

====================  ==========================================================
``status=CODE``       answer HTTP ``CODE`` (400-599) with the route's error body
                      (OpenAI's, or Anthropic's on ``/v1/messages``); 429 and 503
                      also carry ``Retry-After: 1``
``stall=SECONDS``     wait before sending the response headers
``stall-mid=SECONDS`` stream: wait after the first chunk (non-stream: before
                      the body)
``drop=N``            stream: close the TCP connection after N chunks;
                      non-stream: send the headers, then close without a body
``malformed``         non-stream: a 200 whose body is not JSON; stream: after
                      the first event send one whose data is ``{not json`` and end
``reset``             reset the connection before any response
====================  ==========================================================

``@PROB`` (in (0, 1], default 1) is drawn from a RNG seeded by
:attr:`SimConfig.seed`, so a run's sequence of faults is reproducible.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rolltap.errors import ConfigError
from rolltap.sim.script import Script, load_script, parse_script
from rolltap.sim.vocab import VOCAB

__all__ = ["FAULT_KINDS", "FaultKind", "FaultSpec", "SimConfig", "parse_fault"]

FaultKind = Literal["status", "stall", "stall-mid", "drop", "malformed", "reset"]
FAULT_KINDS: tuple[FaultKind, ...] = ("status", "stall", "stall-mid", "drop", "malformed", "reset")

_GRAMMAR = "expected KIND[=ARG][@PROB], e.g. status=429, stall=2.5, drop=3@0.1, reset"
# Which kinds take an argument, and of which type ("int", "float", or None: no argument).
_ARG_TYPE: dict[str, str | None] = {
    "status": "int",
    "stall": "float",
    "stall-mid": "float",
    "drop": "int",
    "malformed": None,
    "reset": None,
}


class FaultSpec(BaseModel):
    """One injected fault: what to do (``kind``, ``arg``) and how often (``prob``)."""

    model_config = ConfigDict(frozen=True)

    kind: FaultKind
    #: the status code, stall seconds or chunk count; ``None`` for ``malformed``/``reset``
    arg: float | None = None
    prob: float = Field(default=1.0, gt=0.0, le=1.0)

    def __str__(self) -> str:
        text: str = self.kind
        if self.arg is not None:
            text += f"={int(self.arg) if self.arg.is_integer() else self.arg}"
        if self.prob < 1.0:
            text += f"@{self.prob}"
        return text


def _bad(spec: str, why: str) -> ConfigError:
    return ConfigError(f"invalid fault spec {spec!r}: {why}; {_GRAMMAR}")


def _parse_number(spec: str, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _bad(spec, f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise _bad(spec, f"{what} {text!r} is not finite")
    return value


def _parse_arg(spec: str, kind: str, text: str | None) -> float | None:
    arg_type = _ARG_TYPE[kind]
    if arg_type is None:
        if text is not None:
            raise _bad(spec, f"{kind!r} takes no argument")
        return None
    if text is None or not text:
        raise _bad(spec, f"{kind!r} needs an argument ({kind}=…)")
    value = _parse_number(spec, text, "argument")
    if arg_type == "int" and not value.is_integer():
        raise _bad(spec, f"{kind!r} needs a whole number, got {text!r}")
    if kind == "status" and not 400 <= value <= 599:
        raise _bad(spec, f"status must be an HTTP error code 400-599, got {text}")
    if value < 0:
        raise _bad(spec, f"{kind!r} must not be negative, got {text}")
    return value


def parse_fault(spec: str) -> FaultSpec:
    """Parse ``KIND[=ARG][@PROB]`` into a :class:`FaultSpec`.

    Raises :class:`rolltap.errors.ConfigError` naming the problem and the grammar.

    >>> parse_fault("status=429@0.5")
    FaultSpec(kind='status', arg=429.0, prob=0.5)
    """
    text = spec.strip()
    body, at, prob_text = text.partition("@")
    prob = 1.0
    if at:
        prob = _parse_number(spec, prob_text, "probability")
        if not 0.0 < prob <= 1.0:
            raise _bad(spec, f"probability must be in (0, 1], got {prob_text}")
    kind, eq, arg_text = body.partition("=")
    kind = kind.strip().lower()
    if kind not in _ARG_TYPE:
        known = ", ".join(FAULT_KINDS)
        raise _bad(spec, f"unknown kind {kind!r} (known: {known})")
    arg = _parse_arg(spec, kind, arg_text.strip() if eq else None)
    return FaultSpec.model_validate({"kind": kind, "arg": arg, "prob": prob})


class SimConfig(BaseModel):
    """How the simulator answers: timing, completion length, faults and the model name.

    ``faults`` accepts :class:`FaultSpec` objects or spec strings (``"status=500@0.1"``);
    ``script`` a :class:`~rolltap.sim.script.Script`, its JSON data (a dict or list) or
    the path of its file.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    seed: int = 0
    #: delay before the first byte of a response, in milliseconds (the base of the time to
    #: first token; ``prefill_ms_per_token`` adds to it)
    ttft_ms: float = Field(default=0.0, ge=0.0)
    #: prefill cost: milliseconds added to the time to first token per prompt token that
    #: misses the prefix cache (every token when there is none); 0: prompts cost nothing
    prefill_ms_per_token: float = Field(default=0.0, ge=0.0)
    #: the prefix cache's size in blocks (an LRU, see :mod:`rolltap.sim.prefix`); 0: none
    prefix_cache_blocks: int = Field(default=0, ge=0)
    #: prompt tokens per cache block (vLLM's default block size is 16)
    prefix_block_tokens: int = Field(default=16, gt=0)
    #: token pacing after the first token; 0 means unlimited
    tokens_per_s: float = Field(default=0.0, ge=0.0)
    #: default completion length in tokens (words); a request's max tokens caps it
    completion_tokens: int = Field(default=16, ge=0)
    faults: tuple[FaultSpec, ...] = ()
    model: str = "sim-model"
    #: the token routes answer with a ``<tool_call>`` when the prompt ids hold this
    #: token (see :mod:`rolltap.sim.completions_in`); ``None`` never calls a tool
    tool_marker: str | None = "<tools>"
    #: the token routes open each completion with this many words of reasoning in
    #: ``<think>\n…\n</think>\n\n`` (a reasoning model's output); 0: none
    reasoning_tokens: int = Field(default=0, ge=0)
    #: the chat route's ``prompt_token_ids`` spell each earlier assistant turn byte by byte
    #: (the same text, other ids than were sampled for it: a server that re-tokenizes its
    #: history), for drift tests; False: the ids a turn was sampled as
    retokenize_history: bool = False
    #: whether ``POST /tokenize`` is served (vLLM's and llama.cpp's shapes); False: 404, as
    #: on a server without it
    tokenize: bool = True
    #: ``/tokenize`` answers a wrong id at this position (a server whose tokenizer is not
    #: the client's), for tokenizer-agreement tests; None: the vocabulary's own ids
    tokenize_mismatch_at: int | None = Field(default=None, ge=0)
    #: extra headers on every response, as a real server sends its own (e.g. llama-server's
    #: ``Access-Control-Allow-Origin``, empty when the request had no ``Origin``)
    response_headers: dict[str, str] = Field(default_factory=dict)
    #: scripted answers per session on the chat, Messages and Responses routes (see
    #: :mod:`rolltap.sim.script`); ``None``: every answer is generated
    script: Script | None = None
    #: the policy (weight) version the engine starts with: answers report it (SGLang's
    #: ``meta_info.weight_version``, ``metadata.weight_version`` on the OpenAI routes) and
    #: ``POST /update_weight_version`` changes it (:mod:`rolltap.sim.weights`); ``None``:
    #: answers report none until a version is set
    policy_version: str | None = None

    @property
    def counts_prompts(self) -> bool:
        """Whether requests' prompts are tokenized into blocks (a cache or a prefill cost)."""
        return self.prefix_cache_blocks > 0 or self.prefill_ms_per_token > 0

    @field_validator("faults", mode="before")
    @classmethod
    def _parse_fault_strings(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (parse_fault(value),)
        if isinstance(value, list | tuple):
            return tuple(parse_fault(v) if isinstance(v, str) else v for v in value)
        return value

    @field_validator("script", mode="before")
    @classmethod
    def _load_script(cls, value: Any) -> Any:
        # A ConfigError is no ValueError, so pydantic lets it through as it is.
        if isinstance(value, str | Path):
            return load_script(value)
        if isinstance(value, dict | list):
            return parse_script(value)
        return value

    @field_validator("tool_marker")
    @classmethod
    def _check_marker(cls, value: str | None) -> str | None:
        if value is not None and VOCAB.id_of(value) is None:
            raise ValueError(f"tool_marker {value!r} is not a token of the simulator's vocabulary")
        return value
