"""``POST /completion``: llama.cpp server's native (not OpenAI-compatible) completion API.

Same answers as ``/v1/completions`` (:func:`~rolltap.sim.completions_in.answer_tokens`),
in llama.cpp's shape. Request fields read: ``prompt`` (token ids or a string),
``n_predict`` (a cap; negative means none), ``stop``, ``stream``, ``n_probs`` (0-20
alternatives per position) and ``return_tokens``. The answer::

    {"index": 0, "content": TEXT, "tokens": [IDS] (empty unless return_tokens),
     "id_slot": 0, "stop": true, "model": M, "tokens_predicted": N,
     "tokens_evaluated": P, "prompt": TEXT OF THE PROMPT, "has_new_line": BOOL,
     "truncated": false, "stop_type": "eos" | "limit" | "word", "stopping_word": S,
     "tokens_cached": 0,
     "completion_probabilities": [{"id", "token", "bytes", "logprob",
                                   "top_logprobs": [{"id", "token", "bytes", "logprob"}]}]}

``completion_probabilities`` is there only when ``n_probs`` > 0. A stream sends one event
per token (``content``, ``tokens``, ``stop: false`` and that token's probabilities),
then a final ``stop: true`` event with empty ``content`` and the totals; no ``[DONE]``.
As on the vLLM route, the end-of-sequence id is in ``tokens`` but not in ``content``.
An aborted generation (llama.cpp has no abort of its own) answers the tokens it had
generated with ``stop_type`` ``"none"`` (llama.cpp's value for a generation that met no
stop condition); a stream ends with that final event.
Not served: ``/tokenize``, ``/detokenize``, ``/infill``, slots, grammars, ``post_sampling_probs``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import orjson

from rolltap.sim.completions_in import (
    MAX_LOGPROBS,
    TokenAnswer,
    TokenPrompt,
    answer_tokens,
    cache_tokens,
    cut_short,
    prompt_ids,
    stop_strings,
    text_pieces,
)
from rolltap.sim.config import SimConfig
from rolltap.sim.content import BadRequest
from rolltap.sim.plan import Dialect, Plan, sse
from rolltap.sim.vocab import VOCAB
from rolltap.sim.wire import error_response

__all__ = ["LLAMACPP", "plan_for"]


def _int(body: dict[str, Any], name: str, default: int) -> int:
    value = body.get(name, default)
    if type(value) is not int:
        raise BadRequest(f"{name}: expected an integer")
    return value


def _probability(token_id: int, logprob: float) -> dict[str, Any]:
    return {
        "id": token_id,
        "token": VOCAB.token(token_id),
        "bytes": list(VOCAB.token_bytes(token_id)),
        "logprob": logprob,
    }


def _probabilities(answer: TokenAnswer, n_probs: int, start: int, stop: int) -> list[Any]:
    out = []
    for token_id, logprob in zip(answer.ids[start:stop], answer.logprobs[start:stop], strict=True):
        entry = _probability(token_id, logprob)
        alternatives = [(token_id + k) % len(VOCAB) for k in range(1, n_probs)]
        others = [_probability(a, round(logprob - k, 4)) for k, a in enumerate(alternatives, 1)]
        entry["top_logprobs"] = [_probability(token_id, logprob), *others]
        out.append(entry)
    return out


def _stop_type(answer: TokenAnswer) -> str:
    if answer.stop_reason is not None:
        return "word"
    return {"stop": "eos", "length": "limit"}.get(answer.finish, "none")


def _final(answer: TokenAnswer, content: str, tokens: list[int]) -> dict[str, Any]:
    return {
        "index": 0,
        "content": content,
        "tokens": tokens,
        "id_slot": 0,
        "stop": True,
        "model": answer.model,
        "tokens_predicted": len(answer.ids),
        "tokens_evaluated": len(answer.prompt_ids),
        "prompt": VOCAB.decode(answer.prompt_ids, skip_control=False),
        "has_new_line": "\n" in answer.text,
        "truncated": False,
        "stop_type": _stop_type(answer),
        "stopping_word": answer.stop_reason or "",
        "tokens_cached": 0,
    }


def _events(answer: TokenAnswer, n_probs: int, return_tokens: bool) -> list[bytes]:
    events = []
    for i, piece in enumerate(text_pieces(answer)):
        event: dict[str, Any] = {
            "index": 0,
            "content": piece,
            "tokens": list(answer.ids[i : i + 1]) if return_tokens else [],
            "stop": False,
            "id_slot": 0,
            "tokens_predicted": i + 1,
            "tokens_evaluated": len(answer.prompt_ids),
        }
        if n_probs > 0:
            event["completion_probabilities"] = _probabilities(answer, n_probs, i, i + 1)
        events.append(sse(event))
    return events


def _token_prompt(body: dict[str, Any], config: SimConfig) -> TokenPrompt:
    n_predict = _int(body, "n_predict", -1)
    return TokenPrompt(
        model=str(body.get("model") or config.model),
        ids=prompt_ids(body.get("prompt")),
        max_tokens=n_predict if n_predict >= 0 else None,
        stop=stop_strings(body.get("stop")),
    )


def plan_for(body: dict[str, Any], config: SimConfig) -> Plan:
    """Serialize the answer to a llama.cpp ``/completion`` request, stream or not."""
    n_probs = _int(body, "n_probs", 0)
    if not 0 <= n_probs <= MAX_LOGPROBS:
        raise BadRequest(f"n_probs: expected 0 to {MAX_LOGPROBS}")
    answer = answer_tokens(_token_prompt(body, config), config)
    return_tokens = body.get("return_tokens") is True
    if body.get("stream") is not True:
        cut = partial(_cut, answer, n_probs, return_tokens)
        return Plan.whole(_whole(answer, n_probs, return_tokens), tokens=len(answer.ids),
                          abort=cut)  # fmt: skip
    events = _events(answer, n_probs, return_tokens)
    token_events = len(events)
    events.append(sse(_final(answer, "", [])))
    tail = partial(_tail, answer)
    return Plan.streamed(events, first_token=0, token_events=token_events, abort=tail)


def _whole(answer: TokenAnswer, n_probs: int, return_tokens: bool) -> bytes:
    final = _final(answer, answer.text, list(answer.ids) if return_tokens else [])
    if n_probs > 0:
        final["completion_probabilities"] = _probabilities(answer, n_probs, 0, len(answer.ids))
    return orjson.dumps(final)


def _cut(answer: TokenAnswer, n_probs: int, return_tokens: bool, n: int) -> Plan:
    return Plan.whole(_whole(cut_short(answer, n), n_probs, return_tokens), tokens=n)


def _tail(answer: TokenAnswer, sent: int) -> Plan:
    return Plan.streamed([sse(_final(cut_short(answer, sent), "", []))], first_token=0,
                         token_events=0)  # fmt: skip


#: llama.cpp's native completion dialect, served at ``POST /completion``.
LLAMACPP = Dialect(
    name="llamacpp",
    plan=plan_for,
    error=error_response,
    ids={},
    malformed_body=b'{"index": 0, "content": "sim", "tokens": [{not json',
    malformed_event=b"data: {not json\n\n",
    prompt_tokens=lambda body, config: cache_tokens(_token_prompt(body, config), config),
)
