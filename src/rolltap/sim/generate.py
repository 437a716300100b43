"""Tokens-in, tokens-out ``/generate`` routes: vLLM's and SGLang's, both at the root.

Same answers as ``/v1/completions`` (:func:`~rolltap.sim.completions_in.answer_tokens`),
in each engine's own shape; neither sends text the token client needs (it decodes ids).

``POST /inference/v1/generate`` (vLLM): request ``token_ids``, ``model``, ``stream`` and
``sampling_params`` (``max_tokens``, ``stop``, ``logprobs``: an int asks for them;
others accepted and ignored). Answer::

    {"request_id": ID, "choices": [{"index": 0, "token_ids": [IDS],
      "logprobs": {"content": [{"token": "token_id:N", "logprob": F}]} | null,
      "finish_reason": "stop" | "length" | "abort"}],
     "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}

A stream sends one such object per sampled id (that id only; the last carries the
finish reason and the usage), then ``data: [DONE]``.

``POST /generate`` (SGLang): request ``input_ids``, ``stream``, ``return_logprob`` and
``sampling_params`` (``max_new_tokens``, ``stop``, ``stop_token_ids``: ints; others
accepted and ignored). Answer::

    {"text": TEXT, "output_ids": [IDS],
     "meta_info": {"id": ID, "prompt_tokens": P, "completion_tokens": C, "cached_tokens": 0,
                   "finish_reason": {"type": "stop", "matched": EOS ID | STOP STRING}
                                    | {"type": "length", "length": C} | {"type": "abort", …},
                   "output_token_logprobs": [[F, ID, null]]  (with return_logprob)}}

A stream's chunks are cumulative, as SGLang's are by default: each holds everything so
far (``finish_reason`` null until the last), then ``data: [DONE]``. With a weight version
(:attr:`SimConfig.policy_version`, ``POST /update_weight_version``) ``meta_info`` also
holds ``weight_version``: the version when that object was written.

An aborted generation (:mod:`rolltap.sim.weights`) answers the ids it had generated, and
their logprobs when asked: vLLM's finish reason ``abort``, SGLang's
``{"type": "abort", "message": "Aborted", "status_code": null, "err_type": null}``; a
stream ends with one more chunk carrying that reason (vLLM's with no ids), then
``[DONE]``.

Cue for tests: ``sampling_params.sim_abort: true`` answers an aborted generation (the
ids so far empty), as an engine does when it drops a request.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from rolltap.sim.completions_in import (
    MAX_LOGPROBS,
    TokenAnswer,
    TokenPrompt,
    answer_tokens,
    cache_tokens,
    prompt_ids,
    stop_strings,
)
from rolltap.sim.config import SimConfig
from rolltap.sim.content import BadRequest
from rolltap.sim.plan import VERSION, Dialect, Plan, hole, sse, versioned
from rolltap.sim.vocab import VOCAB
from rolltap.sim.wire import error_response

__all__ = ["SGLANG", "VLLM_GENERATE"]

_ID = hole("id")
_DONE = b"data: [DONE]\n\n"
# What SGLang's scheduler reports for a request aborted by an abort-all (FINISH_ABORT()).
_SGL_ABORTED = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}


def _params(body: dict[str, Any]) -> dict[str, Any]:
    params = body.get("sampling_params", {})
    if not isinstance(params, dict):
        raise BadRequest("sampling_params: expected an object")
    return params


def _count(params: dict[str, Any], name: str, high: int | None = None) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if type(value) is not int or value < 0 or (high is not None and value > high):
        raise BadRequest(f"sampling_params.{name}: expected a non-negative integer")
    return value


def _answer(body: dict[str, Any], config: SimConfig, ids_field: str, cap: str) -> TokenAnswer:
    return answer_tokens(_prompt(body, config, ids_field, cap), config)


def _prompt(body: dict[str, Any], config: SimConfig, ids_field: str, cap: str) -> TokenPrompt:
    params = _params(body)
    return TokenPrompt(
        model=str(body.get("model") or config.model),
        ids=prompt_ids(body.get(ids_field), ids_field),
        max_tokens=_count(params, cap),
        stop=stop_strings(params.get("stop"), "sampling_params.stop"),
    )


def _aborted(body: dict[str, Any]) -> bool:
    return _params(body).get("sim_abort") is True


def _stream(body: dict[str, Any]) -> bool:
    return body.get("stream") is True


# -- vLLM ----------------------------------------------------------------------------


def _vllm_choice(answer: TokenAnswer, lps: bool, span: range, finish: str | None) -> Any:
    content = [{"token": f"token_id:{answer.ids[i]}", "logprob": answer.logprobs[i]} for i in span]
    return {
        "index": 0,
        "token_ids": [answer.ids[i] for i in span],
        "logprobs": {"content": content} if lps else None,
        "finish_reason": finish,
    }


def _vllm_usage(answer: TokenAnswer, count: int) -> dict[str, int]:
    prompt = len(answer.prompt_ids)
    return {"prompt_tokens": prompt, "completion_tokens": count, "total_tokens": prompt + count}


def _vllm_plan(body: dict[str, Any], config: SimConfig) -> Plan:
    if "token_ids" not in body:
        raise BadRequest("token_ids: required, a list of token ids")
    lps = _count(_params(body), "logprobs", MAX_LOGPROBS) is not None
    answer = _answer(body, config, "token_ids", "max_tokens")
    n = 0 if _aborted(body) else len(answer.ids)
    finish = "abort" if _aborted(body) else answer.finish
    if not _stream(body):
        whole = _vllm_whole(answer, lps, n, finish)
        return Plan.whole(whole, tokens=n, abort=partial(_vllm_cut, answer, lps))
    events = []
    for i in range(max(n, 1)):
        last = i >= n - 1
        choice = _vllm_choice(answer, lps, range(i, min(i + 1, n)), finish if last else None)
        chunk: dict[str, Any] = {"request_id": _ID, "choices": [choice]}
        if last:
            chunk["usage"] = _vllm_usage(answer, n)
        events.append(sse(chunk))
    token_events = len(events)
    events.append(_DONE)
    tail = partial(_vllm_tail, answer, lps)
    return Plan.streamed(events, first_token=0, token_events=token_events, abort=tail)


def _vllm_whole(answer: TokenAnswer, lps: bool, n: int, finish: str) -> bytes:
    choice = _vllm_choice(answer, lps, range(n), finish)
    return orjson.dumps({"request_id": _ID, "choices": [choice], "usage": _vllm_usage(answer, n)})


def _vllm_cut(answer: TokenAnswer, lps: bool, n: int) -> Plan:
    return Plan.whole(_vllm_whole(answer, lps, n, "abort"), tokens=n)


def _vllm_tail(answer: TokenAnswer, lps: bool, sent: int) -> Plan:
    """After ``sent`` one-id chunks: a chunk with no id and the abort, then ``[DONE]``."""
    chunk = {"request_id": _ID, "choices": [_vllm_choice(answer, lps, range(0), "abort")],
             "usage": _vllm_usage(answer, sent)}  # fmt: skip
    return Plan.streamed([sse(chunk), _DONE], first_token=0, token_events=0)


# -- SGLang --------------------------------------------------------------------------


def _sgl_finish(answer: TokenAnswer, aborted: bool) -> dict[str, Any]:
    if aborted:
        return {"type": "abort", "message": "the simulator aborted the request",
                "status_code": 500, "err_type": "InternalServerError"}  # fmt: skip
    if answer.stop_reason is not None:
        return {"type": "stop", "matched": answer.stop_reason}
    if answer.finish == "stop":
        return {"type": "stop", "matched": VOCAB.eos}
    return {"type": "length", "length": len(answer.ids)}


def _sgl_object(
    answer: TokenAnswer, n: int, lps: bool, finish: dict[str, Any] | None, version: bool
) -> dict[str, Any]:
    ids = list(answer.ids[:n])
    meta: dict[str, Any] = {
        "id": _ID,
        "finish_reason": finish,
        "prompt_tokens": len(answer.prompt_ids),
        "completion_tokens": n,
        "cached_tokens": 0,
        "e2e_latency": 0.0,
    }
    if version:
        meta["weight_version"] = VERSION
    if lps:
        entries = [[answer.logprobs[i], answer.ids[i], None] for i in range(n)]
        meta["output_token_logprobs"] = entries
    text = answer.text if n == len(answer.ids) else VOCAB.decode(ids)
    return {"text": text, "output_ids": ids, "meta_info": meta}


def _sglang_plan(body: dict[str, Any], config: SimConfig) -> Plan:
    if "input_ids" not in body:
        raise BadRequest("input_ids: required, a list of token ids")
    stop_ids = _params(body).get("stop_token_ids")
    if stop_ids is not None and not (
        isinstance(stop_ids, list) and all(type(i) is int for i in stop_ids)
    ):
        raise BadRequest("sampling_params.stop_token_ids: expected a list of integers")
    lps = body.get("return_logprob") is True
    answer = _answer(body, config, "input_ids", "max_new_tokens")
    aborted, version = _aborted(body), versioned(config)
    n = 0 if aborted else len(answer.ids)
    finish = _sgl_finish(answer, aborted)
    if not _stream(body):
        whole = orjson.dumps(_sgl_object(answer, n, lps, finish, version))
        return Plan.whole(whole, tokens=n, abort=partial(_sgl_cut, answer, lps, version))
    events = [
        sse(_sgl_object(answer, i, lps, finish if i == n else None, version))
        for i in range(min(1, n), n + 1)
    ]
    token_events = len(events)
    events.append(_DONE)
    tail = partial(_sgl_tail, answer, lps, version)
    return Plan.streamed(events, first_token=0, token_events=token_events, abort=tail)


def _sgl_cut(answer: TokenAnswer, lps: bool, version: bool, n: int) -> Plan:
    """The object of a generation aborted after ``n`` ids."""
    return Plan.whole(orjson.dumps(_sgl_object(answer, n, lps, _SGL_ABORTED, version)), tokens=n)


def _sgl_tail(answer: TokenAnswer, lps: bool, version: bool, sent: int) -> Plan:
    """After ``sent`` cumulative chunks (chunk i holds i + 1 ids): the ``sent`` ids with
    the abort, then ``[DONE]``."""
    last = sse(_sgl_object(answer, sent, lps, _SGL_ABORTED, version))
    return Plan.streamed([last, _DONE], first_token=0, token_events=0)


def _prompt_tokens(ids_field: str, cap: str) -> Callable[[dict[str, Any], SimConfig], Any]:
    return lambda body, config: cache_tokens(_prompt(body, config, ids_field, cap), config)


#: vLLM's tokens-in/tokens-out route, served at ``POST /inference/v1/generate``.
VLLM_GENERATE = Dialect(
    name="vllm-generate",
    plan=_vllm_plan,
    error=error_response,
    ids={"id": "gen-sim-"},
    malformed_body=b'{"request_id": "gen-sim", "choices": [{not json',
    malformed_event=b"data: {not json\n\n",
    prompt_tokens=_prompt_tokens("token_ids", "max_tokens"),
)

#: SGLang's native generation route, served at ``POST /generate``.
SGLANG = Dialect(
    name="sglang",
    plan=_sglang_plan,
    error=error_response,
    ids={"id": "sgl-sim-"},
    malformed_body=b'{"text": "sim", "output_ids": [{not json',
    malformed_event=b"data: {not json\n\n",
    prompt_tokens=_prompt_tokens("input_ids", "max_new_tokens"),
)
