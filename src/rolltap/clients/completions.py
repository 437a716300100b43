"""Token-in, token-out completions: the upstream side of the token client.

Two wire flavors ask a server to continue a list of prompt token ids and to say which
ids it sampled, with their logprobs:

- ``vllm``: ``POST /v1/completions`` with ``prompt: [ids]``, ``logprobs: 0``,
  ``return_tokens_as_token_ids`` and ``return_token_ids`` (vLLM and SGLang's
  OpenAI-compatible servers);
- ``llamacpp``: ``POST /completion`` with ``prompt: [ids]``, ``n_probs: 1`` and
  ``return_tokens`` (llama.cpp's own server, as the built-in local model runs it).

Both are parsed into one :class:`Completion`; the sampled ids include the end-of-turn
token when the model stopped on it (servers leave it out of the text only).

>>> completions_body("llamacpp", model="m", prompt_ids=[1, 2], options={"max_tokens": 8})
{'prompt': [1, 2], 'n_predict': 8, 'n_probs': 1, 'return_tokens': True, 'cache_prompt': True}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rolltap.dialects.canonical import StopReason, Usage
from rolltap.errors import UpstreamProtocolError

__all__ = [
    "COMPLETIONS_PATHS",
    "Completion",
    "CompletionsFlavor",
    "completions_body",
    "parse_completion",
]

CompletionsFlavor = Literal["vllm", "llamacpp"]
COMPLETIONS_PATHS: Mapping[str, str] = {"vllm": "/v1/completions", "llamacpp": "/completion"}

#: request option (the run's and the harness's names) → llama.cpp's name
_LLAMACPP_NAMES = {"max_tokens": "n_predict"}
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
    text: str
    ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    stop_reason: StopReason | None
    usage: Usage


def completions_body(
    flavor: CompletionsFlavor, *, model: str, prompt_ids: Sequence[int],
    options: Mapping[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The request body; ``options`` are sampling settings under chat's names."""
    if flavor == "llamacpp":
        body: dict[str, Any] = {"prompt": list(prompt_ids)}
        body.update({_LLAMACPP_NAMES.get(k, k): v for k, v in options.items()})
        body.update({"n_probs": 1, "return_tokens": True, "cache_prompt": True})
        return body
    body = {"model": model, "prompt": list(prompt_ids), **options}
    body.update({"logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True})
    return body


def parse_completion(flavor: CompletionsFlavor, body: Mapping[str, Any]) -> Completion:
    """The upstream's answer; :class:`UpstreamProtocolError` when it lacks the ids."""
    try:
        if flavor == "llamacpp":
            return _llamacpp(body)
        return _vllm(body)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UpstreamProtocolError(
            f"upstream completion is missing token ids or logprobs ({flavor}): {exc!r}"
        ) from exc


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
    )  # fmt: skip


def _llamacpp(body: Mapping[str, Any]) -> Completion:
    probs = body.get("completion_probabilities")
    stop_type = body.get("stop_type")
    stop = _LLAMACPP_STOP.get(str(stop_type))
    return Completion(
        id=str(body.get("id_slot", "")), model=str(body.get("model", "")),
        text=body["content"], ids=tuple(int(i) for i in body["tokens"]),
        logprobs=None if not probs else tuple(float(p["logprob"]) for p in probs),
        stop_reason=stop,
        usage=Usage(int(body.get("tokens_evaluated", 0)), int(body.get("tokens_predicted", 0))),
    )  # fmt: skip
