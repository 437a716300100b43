"""Token-in, token-out completions: the upstream side of the token client.

Four wire flavors ask a server to continue a list of prompt token ids and to say which
ids it sampled, with their logprobs:

- ``vllm``: ``POST /v1/completions`` with ``prompt: [ids]``, ``logprobs: 0``,
  ``return_tokens_as_token_ids`` and ``return_token_ids`` (vLLM and SGLang's
  OpenAI-compatible servers);
- ``llamacpp``: ``POST /completion`` with ``prompt: [ids]``, ``n_probs: 1`` and
  ``return_tokens`` (llama.cpp's own server, as the built-in local model runs it),
  streamed when there are stop strings: a whole answer leaves out the probabilities of
  the stop word's tokens, a stream's events do not
  (:mod:`~rolltap.clients.completions_llamacpp`);
- ``vllm-generate``: vLLM's tokens-in/tokens-out ``POST /inference/v1/generate`` (at the
  server root) with ``token_ids`` and ``sampling_params`` (``logprobs: 0``); the answer
  has ``choices[].token_ids`` and ``choices[].logprobs.content[].logprob``, no text;
- ``sglang``: SGLang's native ``POST /generate`` (at the root) with ``input_ids``,
  ``sampling_params`` and ``return_logprob``; the answer has ``output_ids`` and
  ``meta_info`` (counts, ``finish_reason.type``, ``output_token_logprobs``), no text
  the parsers can use.

All are parsed into one :class:`Completion`; the sampled ids include the end-of-turn
token when the model stopped on it (servers leave it out of the text only). The two
``/generate`` flavors leave ``text`` None: the token client decodes the ids locally.
A max token count is always sent (engine defaults differ, 16 or 128).

An engine that aborts a generation (a weight update, an abort-all, a pause) answers the
ids it had sampled so far: SGLang's ``finish_reason.type`` ``abort``, vLLM's
``finish_reason`` ``abort`` (both its flavors). That is :attr:`Completion.aborted`, not an
error: the token client continues the completion (:mod:`rolltap.clients.continuation`)
from the prompt + those ids (:func:`continued_body`). llama.cpp has no such answer (a
cancelled slot answers nothing). The engine's weight version, where it reports one, is
:attr:`Completion.weight_version`.

>>> completions_body("llamacpp", model="m", prompt_ids=[1, 2], options={"max_tokens": 8})
{'prompt': [1, 2], 'n_predict': 8, 'n_probs': 1, 'return_tokens': True, 'cache_prompt': True}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rolltap.clients.completions_llamacpp import per_id
from rolltap.clients.weight_version import reported_version
from rolltap.dialects.canonical import StopReason, Usage
from rolltap.errors import UpstreamProtocolError

__all__ = [
    "COMPLETIONS_PATHS",
    "ROOT_FLAVORS",
    "Completion",
    "CompletionsFlavor",
    "completions_body",
    "continued_body",
    "last_event",
    "parse_completion",
]

CompletionsFlavor = Literal["vllm", "llamacpp", "vllm-generate", "sglang"]
COMPLETIONS_PATHS: Mapping[str, str] = {
    "vllm": "/v1/completions", "llamacpp": "/completion",
    "vllm-generate": "/inference/v1/generate", "sglang": "/generate",
}  # fmt: skip
#: flavors whose path is at the server root, not under the base URL's ``/v1``
ROOT_FLAVORS = frozenset({"llamacpp", "vllm-generate", "sglang"})

#: request option (the run's and the harness's names) → llama.cpp's name
_LLAMACPP_NAMES = {"max_tokens": "n_predict"}
#: … → SGLang's sampling_params names
_SGLANG_NAMES = {"max_tokens": "max_new_tokens", "seed": "sampling_seed"}
_TOKEN_ID_PREFIX = "token_id:"
_VLLM_STOP: dict[str, StopReason] = {"stop": "end_turn", "length": "max_tokens"}
_LLAMACPP_STOP: dict[str, StopReason] = {
    "eos": "end_turn", "limit": "max_tokens", "word": "stop_sequence",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Completion:
    """What the upstream sampled: text, the ids behind it and their logprobs."""

    id: str
    model: str
    #: the server's text; None when it sends none (the ``/generate`` flavors)
    text: str | None
    ids: tuple[int, ...]
    #: one per id (None where the server reported none); None when it reported none at all
    logprobs: tuple[float | None, ...] | None
    stop_reason: StopReason | None
    usage: Usage
    #: the engine aborted the generation: ``ids`` are those it sampled before (the stop
    #: reason None)
    aborted: bool = False
    #: the weight version the engine reported in the answer (None: it reported none)
    weight_version: str | None = None


def completions_body(
    flavor: CompletionsFlavor, *, model: str, prompt_ids: Sequence[int],
    options: Mapping[str, Any], stop_ids: Sequence[int] = (),
) -> dict[str, Any]:  # fmt: skip
    """The request body; ``options`` are sampling settings under chat's names;
    ``stop_ids`` end a turn (sent to SGLang as ``stop_token_ids``)."""
    if flavor == "vllm-generate":
        params = {**options, "logprobs": 0}
        return {"model": model, "token_ids": list(prompt_ids), "sampling_params": params,
                "stream": False}  # fmt: skip
    if flavor == "sglang":
        params = {_SGLANG_NAMES.get(k, k): v for k, v in options.items()}
        if stop_ids:
            params["stop_token_ids"] = list(stop_ids)
        # special tokens kept: tool-call and reasoning markers are special in many vocabularies
        params["skip_special_tokens"] = False
        return {"input_ids": list(prompt_ids), "sampling_params": params,
                "return_logprob": True, "stream": False}  # fmt: skip
    if flavor == "llamacpp":
        body: dict[str, Any] = {"prompt": list(prompt_ids)}
        body.update({_LLAMACPP_NAMES.get(k, k): v for k, v in options.items()})
        body.update({"n_probs": 1, "return_tokens": True, "cache_prompt": True})
        if options.get("stop"):
            # a whole answer loses the stop word's probabilities; a stream's events keep them
            body["stream"] = True
        return body
    body = {"model": model, "prompt": list(prompt_ids), **options}
    body.update({"logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True})
    return body


def parse_completion(
    flavor: CompletionsFlavor, body: Mapping[str, Any], *, prompt_len: int = 0
) -> Completion:
    """The upstream's answer (an aborted generation's too: :attr:`Completion.aborted`);
    :class:`UpstreamProtocolError` when it lacks the ids. ``prompt_len`` counts the
    prompt when the answer has no usage."""
    try:
        if flavor == "llamacpp":
            done = _llamacpp(body)
        elif flavor == "vllm-generate":
            done = _vllm_generate(body, prompt_len)
        elif flavor == "sglang":
            done = _sglang(body)
        else:
            done = _vllm(body)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UpstreamProtocolError(
            f"upstream completion is missing token ids or logprobs ({flavor}): {exc!r}"
        ) from exc
    version = reported_version(body)
    return done if version is None else dataclasses.replace(done, weight_version=version)


#: where each flavor's request body holds the prompt ids and the token budget
_PROMPT_FIELD = {"vllm": "prompt", "llamacpp": "prompt", "vllm-generate": "token_ids",
                 "sglang": "input_ids"}  # fmt: skip
_BUDGET_FIELD = {"vllm": "max_tokens", "llamacpp": "n_predict", "vllm-generate": "max_tokens",
                 "sglang": "max_new_tokens"}  # fmt: skip


def continued_body(
    flavor: CompletionsFlavor, body: Mapping[str, Any], *, prompt_ids: Sequence[int],
    max_tokens: int,
) -> dict[str, Any]:  # fmt: skip
    """``body`` (one :func:`completions_body` made) asking instead to continue
    ``prompt_ids`` (the prompt + the ids sampled so far) for at most ``max_tokens``.

    >>> first = completions_body("sglang", model="m", prompt_ids=[1], options={"max_tokens": 8})
    >>> later = continued_body("sglang", first, prompt_ids=[1, 5, 6], max_tokens=6)
    >>> later["input_ids"], later["sampling_params"]["max_new_tokens"]
    ([1, 5, 6], 6)
    """
    out = dict(body)
    out[_PROMPT_FIELD[flavor]] = list(prompt_ids)
    if "sampling_params" in out:
        out["sampling_params"] = {**out["sampling_params"], _BUDGET_FIELD[flavor]: max_tokens}
    else:
        out[_BUDGET_FIELD[flavor]] = max_tokens
    return out


def _vllm(body: Mapping[str, Any]) -> Completion:
    choice = body["choices"][0]
    logprobs = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if not isinstance(ids, list):
        ids = [int(str(t).removeprefix(_TOKEN_ID_PREFIX)) for t in logprobs["tokens"]]
    values = logprobs.get("token_logprobs")
    finish = choice.get("finish_reason")
    stop = _VLLM_STOP.get(finish) if isinstance(finish, str) else None
    if finish == "stop" and isinstance(choice.get("stop_reason"), str):
        stop = "stop_sequence"
    usage = body.get("usage") or {}
    return Completion(
        id=str(body.get("id", "")), model=str(body.get("model", "")), text=choice["text"],
        ids=tuple(int(i) for i in ids),
        logprobs=None if values is None else tuple(float(v) for v in values),
        stop_reason=stop,
        usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
        aborted=finish == "abort",
    )  # fmt: skip


def _llamacpp(body: Mapping[str, Any]) -> Completion:
    ids = tuple(int(i) for i in body["tokens"])
    probs = body.get("completion_probabilities")
    # entries are placed on ids, None where llama-server left one out (stop words, bytes)
    logprobs = per_id(ids, [(int(p["id"]), float(p["logprob"])) for p in probs]) if probs else None
    stop_type = body.get("stop_type")
    stop = _LLAMACPP_STOP.get(str(stop_type))
    return Completion(
        id=str(body.get("id_slot", "")), model=str(body.get("model", "")),
        text=body["content"], ids=ids, logprobs=logprobs, stop_reason=stop,
        usage=Usage(int(body.get("tokens_evaluated", 0)), int(body.get("tokens_predicted", 0))),
    )  # fmt: skip


def last_event(raw: bytes) -> bytes | None:
    """The data of the last event of a server-sent event body (``[DONE]`` aside); ``None``
    when ``raw`` is not one. SGLang's stream chunks are cumulative: the last one is the
    whole answer, so the chunks are never joined."""
    if not raw.lstrip().startswith(b"data:"):
        return None
    last = None
    for line in raw.splitlines():
        data = line.removeprefix(b"data:").strip()
        if line.startswith(b"data:") and data and data != b"[DONE]":
            last = data
    return last


def _ints(values: Any) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(type(v) is int for v in values):
        raise ValueError("token ids must be a list of integers")
    return tuple(values)


def _vllm_generate(body: Mapping[str, Any], prompt_len: int) -> Completion:
    choice = body["choices"][0]
    ids = _ints(choice["token_ids"])
    finish = choice.get("finish_reason")
    content = (choice.get("logprobs") or {}).get("content")
    values = None if content is None else tuple(float(c["logprob"]) for c in content)
    if values is not None and len(values) != len(ids):
        raise ValueError("one logprob per token id expected")
    stop = _VLLM_STOP.get(finish) if isinstance(finish, str) else None
    usage = body.get("usage")
    counts = (
        Usage(int(usage["prompt_tokens"]), int(usage["completion_tokens"]))
        if isinstance(usage, dict) else Usage(prompt_len, len(ids))
    )  # fmt: skip
    return Completion(
        id=str(body.get("request_id") or body.get("id") or ""), model=str(body.get("model", "")),
        text=None, ids=ids, logprobs=values, stop_reason=stop, usage=counts,
        aborted=finish == "abort",
    )  # fmt: skip


def _sglang(body: Mapping[str, Any]) -> Completion:
    meta = body["meta_info"]
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else None
    ids = _ints(body["output_ids"])
    entries = meta.get("output_token_logprobs")
    values = None if entries is None else tuple(float(e[0]) for e in entries)
    if entries is not None and [int(e[1]) for e in entries] != list(ids):
        raise ValueError("output_token_logprobs do not match output_ids")
    stop: StopReason | None = None
    if kind == "length":
        stop = "max_tokens"
    elif kind == "stop":
        stop = "stop_sequence" if isinstance(finish.get("matched"), str) else "end_turn"
    return Completion(
        id=str(meta.get("id", "")), model=str(body.get("model", "")), text=None, ids=ids,
        logprobs=values, stop_reason=stop,
        usage=Usage(int(meta["prompt_tokens"]), int(meta["completion_tokens"])),
        aborted=kind == "abort",
    )  # fmt: skip
