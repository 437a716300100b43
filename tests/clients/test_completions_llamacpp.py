"""llama.cpp's ``/completion`` answers as the token client reads them: streamed when the
request has stop strings, one logprob (or None) per sampled id. The answers are the real
llama-server's (Gemma 3 270M, as measured), trimmed to the fields read."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rolltap.clients.completions import completions_body, parse_completion
from rolltap.clients.completions_llamacpp import fold_stream, per_id
from rolltap.dialects.canonical import Usage
from rolltap.errors import UpstreamProtocolError


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)


def _prob(token_id: int, logprob: float) -> dict[str, Any]:
    return {"id": token_id, "token": "", "bytes": [], "logprob": logprob,
            "top_logprobs": [{"id": token_id, "logprob": logprob}]}  # fmt: skip


def _chunk(token_id: int, logprob: float, content: str, predicted: int) -> dict[str, Any]:
    return {"index": 0, "content": content, "tokens": [token_id], "stop": False,
            "id_slot": -1, "tokens_predicted": predicted, "tokens_evaluated": 16,
            "completion_probabilities": [_prob(token_id, logprob)]}  # fmt: skip


def _final(predicted: int, stop_type: str = "word", word: str = "Line") -> dict[str, Any]:
    return {"index": 0, "content": "", "tokens": [], "id_slot": 0, "stop": True,
            "model": "gemma-3-270m", "tokens_predicted": predicted, "tokens_evaluated": 16,
            "stop_type": stop_type, "stopping_word": word}  # fmt: skip


#: ``stop: ["Line"]`` streamed: the newline, then "Line" (its event's content held back)
STOP_WORD_STREAM = _sse(_chunk(107, -0.0965, "\n", 1), _chunk(4539, -0.1692, "", 2), _final(2))


def test_a_request_with_stop_strings_is_streamed_and_one_without_is_not() -> None:
    options = {"max_tokens": 8, "temperature": 0}
    plain = completions_body("llamacpp", model="m", prompt_ids=[1, 2], options=options)
    assert "stream" not in plain
    stopped = completions_body(
        "llamacpp", model="m", prompt_ids=[1, 2], options={**options, "stop": ["\n"]}
    )
    assert stopped == {"prompt": [1, 2], "n_predict": 8, "temperature": 0, "stop": ["\n"],
                       "n_probs": 1, "return_tokens": True, "cache_prompt": True,
                       "stream": True}  # fmt: skip
    empty = completions_body("llamacpp", model="m", prompt_ids=[1], options={"stop": []})
    assert "stream" not in empty


def test_a_streamed_stop_word_answer_has_every_ids_logprob() -> None:
    folded = fold_stream(STOP_WORD_STREAM)
    assert folded is not None
    done = parse_completion("llamacpp", folded)
    assert (done.text, done.ids, done.logprobs) == ("\n", (107, 4539), (-0.0965, -0.1692))
    assert (done.stop_reason, done.usage, done.model) == (
        "stop_sequence", Usage(16, 2), "gemma-3-270m",
    )  # fmt: skip


def test_a_whole_stop_word_answer_says_which_ids_have_no_logprob() -> None:
    # llama-server cuts the stop word's entries from a whole answer's probabilities
    cut = {**_final(2), "content": "\n", "tokens": [107, 4539],
           "completion_probabilities": [_prob(107, -0.0965)]}  # fmt: skip
    assert parse_completion("llamacpp", cut).logprobs == (-0.0965, None)
    # ... all of them when the word alone is as long as the answer: no logprobs at all
    none = {**_final(1, word="\n"), "content": "", "tokens": [107]}
    assert parse_completion("llamacpp", none).logprobs is None


def test_bytes_of_one_character_have_no_logprob_and_repeats_are_not_guessed() -> None:
    # " 𓀀 ": 𓀀 is four byte tokens; only the one that completes it has an entry, and
    # its byte token (366) appears twice, so which 366 it belongs to is not said
    answer = {**_final(6, "limit", ""), "content": " 𓀀 ",
              "tokens": [236743, 478, 385, 366, 366, 236743],
              "completion_probabilities": [_prob(236743, -0.058), _prob(366, -0.001),
                                           _prob(236743, -0.062)]}  # fmt: skip
    done = parse_completion("llamacpp", answer)
    assert done.logprobs == (-0.058, None, None, None, None, -0.062)
    assert per_id([478, 385, 366], [(366, -0.001)]) == (None, None, -0.001)


def test_entries_that_do_not_follow_the_tokens_are_a_protocol_error() -> None:
    wrong = {**_final(2), "content": "\n", "tokens": [107, 4539],
             "completion_probabilities": [_prob(4539, -0.1), _prob(107, -0.2)]}  # fmt: skip
    with pytest.raises(UpstreamProtocolError, match="llamacpp"):
        parse_completion("llamacpp", wrong)


def test_keepalive_comments_before_the_first_event_are_skipped() -> None:
    # llama-server sends ":" lines while it processes a long prompt
    folded = fold_stream(b":\n\n:\n\n" + STOP_WORD_STREAM)
    assert folded is not None
    assert parse_completion("llamacpp", folded).logprobs == (-0.0965, -0.1692)


def test_a_stream_that_lost_ids_is_a_protocol_error_not_a_short_record() -> None:
    # a token ending inside a UTF-8 character is sent in no event: 3 of 5 ids are missing
    lossy = _sse(_chunk(236743, -0.058, " ", 1), _chunk(366, -0.001, "𓀀", 5), _final(5))
    with pytest.raises(UpstreamProtocolError, match="2 of the 5"):
        fold_stream(lossy)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_sse(_chunk(107, -0.1, "\n", 1)), "without its final event"),
        (b"data: {not json\n\n", "not JSON"),
        (b"data: [1, 2]\n\n", "not a JSON object"),
        (_sse({"error": {"code": 500, "message": "boom"}}), "reported an error"),
        (b':\n\nerror: {"code": 500, "message": "boom"}\n\n', "reported an error"),
    ],
)
def test_a_broken_stream_is_a_protocol_error(raw: bytes, message: str) -> None:
    with pytest.raises(UpstreamProtocolError, match=message):
        fold_stream(raw)


def test_a_whole_answer_is_not_folded() -> None:
    assert fold_stream(orjson.dumps(_final(0))) is None
    assert fold_stream(b"") is None
    assert fold_stream(b":\n\n") is None
