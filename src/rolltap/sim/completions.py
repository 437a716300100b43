"""``POST /v1/completions``: OpenAI's legacy completions, as vLLM serves them for token ids.

The request's ``prompt`` is a list of token ids (or a string, encoded with the simulator's
:data:`~rolltap.sim.vocab.VOCAB`); the answer is
:func:`~rolltap.sim.completions_in.answer_tokens`'s.
Request fields read: ``model``, ``prompt``, ``max_tokens``, ``stop``, ``stream``,
``stream_options.include_usage``, ``logprobs`` (an int, 0-20: each position gets the sampled
token plus that many alternatives in ``top_logprobs``) and vLLM's
``return_tokens_as_token_ids`` (``logprobs.tokens`` and the ``top_logprobs`` keys become
``"token_id:<id>"``) and ``return_token_ids`` (the choice carries ``prompt_token_ids`` and
``token_ids``; in a stream, ``prompt_token_ids`` on the first chunk only and each chunk's
own ``token_ids``). ``temperature`` and other sampling settings are accepted and ignored;
``echo``, ``n`` > 1 and several prompts are refused with a 400.

Like vLLM, ``token_ids`` and ``logprobs`` include the end-of-sequence token of a completion
that ended naturally, while ``text`` leaves it out; ``stop_reason`` names the stop string
that ended one, else is ``null``; a stream's last token chunk carries the finish reason.

With a weight version, the body (a stream: the chunk with the finish reason) ends with
``"metadata": {"weight_version": V}``, as SGLang's OpenAI-compatible server reports it.
An aborted generation answers the tokens it had generated with the finish reason
``abort``; a stream ends with one more chunk (no text, no ids) carrying it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
from rolltap.sim.plan import CREATED, VERSION, Dialect, Plan, hole, sse, versioned
from rolltap.sim.vocab import VOCAB
from rolltap.sim.wire import error_response

__all__ = ["COMPLETIONS", "plan_for"]

_ID = hole("id")
_DONE_EVENT = b"data: [DONE]\n\n"
_METADATA = {"weight_version": VERSION}


@dataclass(frozen=True, slots=True)
class _Options:
    """How the request wants the answer shaped."""

    logprobs: int | None
    as_ids: bool
    token_ids: bool
    stream: bool
    include_usage: bool
    #: whether the answer reports the weight version
    version: bool = False


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise BadRequest(f"{name}: expected a boolean")
    return value is True


def _count(body: dict[str, Any], name: str, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if type(value) is not int or value < 0 or (high is not None and value > high):
        bound = f" at most {high}" if high is not None else ""
        raise BadRequest(f"{name}: expected a non-negative integer{bound}")
    return value


def _read(body: dict[str, Any], config: SimConfig) -> tuple[TokenPrompt, _Options]:
    if body.get("echo") is True:
        raise BadRequest("echo: not supported by the simulator")
    if body.get("n", 1) not in (1, None):
        raise BadRequest("n: the simulator answers one choice")
    options = body.get("stream_options")
    prompt = TokenPrompt(
        model=str(body.get("model") or config.model),
        ids=prompt_ids(body.get("prompt")),
        max_tokens=_count(body, "max_tokens"),
        stop=stop_strings(body.get("stop")),
    )
    return prompt, _Options(
        logprobs=_count(body, "logprobs", MAX_LOGPROBS),
        as_ids=_flag(body, "return_tokens_as_token_ids"),
        token_ids=_flag(body, "return_token_ids"),
        stream=_flag(body, "stream"),
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )


def _token(token_id: int, as_ids: bool) -> str:
    return f"token_id:{token_id}" if as_ids else VOCAB.token(token_id)


def _top(token_id: int, logprob: float, options: _Options) -> dict[str, float]:
    """The sampled token and ``options.logprobs`` alternatives, each less likely by 1."""
    top = {_token(token_id, options.as_ids): logprob}
    for k in range(1, (options.logprobs or 0) + 1):
        # setdefault: a readable byte and a word may share a string; the first one wins
        top.setdefault(_token((token_id + k) % len(VOCAB), options.as_ids), round(logprob - k, 4))
    return top


def _logprobs(
    answer: TokenAnswer, pieces: list[str], options: _Options, start: int, stop: int
) -> dict[str, Any] | None:
    """The ``logprobs`` object of the completion tokens ``start:stop``."""
    if options.logprobs is None:
        return None
    offset = sum(len(p) for p in pieces[:start])
    offsets = []
    for piece in pieces[start:stop]:
        offsets.append(offset)
        offset += len(piece)
    span = range(start, stop)
    return {
        "tokens": [_token(answer.ids[i], options.as_ids) for i in span],
        "token_logprobs": [answer.logprobs[i] for i in span],
        "top_logprobs": [_top(answer.ids[i], answer.logprobs[i], options) for i in span],
        "text_offset": offsets,
    }


def _usage(answer: TokenAnswer) -> dict[str, Any]:
    prompt, completion = len(answer.prompt_ids), len(answer.ids)
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def _body(answer: TokenAnswer, options: _Options) -> bytes:
    """The whole (non-stream) answer."""
    pieces = text_pieces(answer)
    choice = {
        "index": 0,
        "text": answer.text,
        "logprobs": _logprobs(answer, pieces, options, 0, len(answer.ids)),
        "finish_reason": answer.finish,
        "stop_reason": answer.stop_reason,
        "prompt_logprobs": None,
        "prompt_token_ids": list(answer.prompt_ids) if options.token_ids else None,
        "token_ids": list(answer.ids) if options.token_ids else None,
    }
    body = {
        "id": _ID,
        "object": "text_completion",
        "created": CREATED,
        "model": answer.model,
        "choices": [choice],
        "system_fingerprint": None,
        "usage": _usage(answer),
    }
    if options.version:
        body["metadata"] = _METADATA
    return orjson.dumps(body)


def _chunk(answer: TokenAnswer, options: _Options, choices: list[Any], usage: Any) -> bytes:
    chunk: dict[str, Any] = {
        "id": _ID,
        "object": "text_completion",
        "created": CREATED,
        "model": answer.model,
        "choices": choices,
    }
    if options.include_usage:
        chunk["usage"] = usage
    if options.version and any(c["finish_reason"] is not None for c in choices):
        chunk["metadata"] = _METADATA
    return sse(chunk)


def _token_chunks(answer: TokenAnswer, options: _Options) -> list[bytes]:
    """One chunk per completion token (one empty chunk for an empty completion)."""
    pieces = text_pieces(answer)
    count = len(answer.ids)
    events = []
    for i in range(max(count, 1)):
        last = i >= count - 1
        choice: dict[str, Any] = {
            "index": 0,
            "text": pieces[i] if count else "",
            "logprobs": _logprobs(answer, pieces, options, i, min(i + 1, count)),
            "finish_reason": answer.finish if last else None,
            "stop_reason": answer.stop_reason if last else None,
        }
        if options.token_ids:
            if i == 0:
                choice["prompt_token_ids"] = list(answer.prompt_ids)
            choice["token_ids"] = list(answer.ids[i : i + 1])
        events.append(_chunk(answer, options, [choice], None))
    return events


def _tail(answer: TokenAnswer, options: _Options, sent: int) -> Plan:
    """The end of a stream aborted after ``sent`` token chunks."""
    cut = cut_short(answer, sent)
    choice: dict[str, Any] = {
        "index": 0,
        "text": "",
        "logprobs": _logprobs(cut, [], options, sent, sent),
        "finish_reason": "abort",
        "stop_reason": None,
    }
    if options.token_ids:
        if sent == 0:
            choice["prompt_token_ids"] = list(answer.prompt_ids)
        choice["token_ids"] = []
    events = [_chunk(answer, options, [choice], None)]
    if options.include_usage:
        events.append(_chunk(answer, options, [], _usage(cut)))
    events.append(_DONE_EVENT)
    return Plan.streamed(events, first_token=0, token_events=0)


def _cut(answer: TokenAnswer, options: _Options, n: int) -> Plan:
    return Plan.whole(_body(cut_short(answer, n), options), tokens=n)


def plan_for(body: dict[str, Any], config: SimConfig) -> Plan:
    """Serialize the answer to a completions request, stream or not."""
    prompt, options = _read(body, config)
    options = replace(options, version=versioned(config))
    answer = answer_tokens(prompt, config)
    if not options.stream:
        cut = partial(_cut, answer, options)
        return Plan.whole(_body(answer, options), tokens=len(answer.ids), abort=cut)
    events = _token_chunks(answer, options)
    token_events = len(events)
    if options.include_usage:
        events.append(_chunk(answer, options, [], _usage(answer)))
    events.append(_DONE_EVENT)
    tail = partial(_tail, answer, options)
    return Plan.streamed(events, first_token=0, token_events=token_events, abort=tail)


#: The completions dialect, served at ``POST /v1/completions``.
COMPLETIONS = Dialect(
    name="completions",
    plan=plan_for,
    error=error_response,
    ids={"id": "cmpl-sim-"},
    malformed_body=b'{"id": "cmpl-sim", "object": "text_completion", "choices": [{not json',
    malformed_event=b"data: {not json\n\n",
    prompt_tokens=lambda body, config: cache_tokens(_read(body, config)[0], config),
)
