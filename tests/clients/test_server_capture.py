"""What a server-side token capture takes out of an answer and what it records."""

from __future__ import annotations

from typing import Any

from rolltap.clients.capture import ServerCapture, capture_rewrites, captured_fields


def test_the_rewrites_ask_only_for_what_the_harness_did_not() -> None:
    body: dict[str, Any] = {"logprobs": True}
    rewrites, capture = capture_rewrites(body, logprobs=True)
    assert rewrites == [{"field": "return_token_ids", "from": None, "to": True}]
    assert body == {"logprobs": True, "return_token_ids": True}
    assert (capture.strip_ids, capture.strip_logprobs) == (True, False)
    asked: dict[str, Any] = {"return_token_ids": True}
    rewrites, capture = capture_rewrites(asked, logprobs=True)
    assert rewrites == [{"field": "logprobs", "from": None, "to": True}]
    assert (capture.strip_ids, capture.strip_logprobs) == (False, True)


def test_a_body_loses_the_fields_the_gateway_asked_for() -> None:
    capture = ServerCapture(strip_ids=True, strip_logprobs=True)
    lp = {"content": [{"token": "a", "logprob": -0.5}]}
    body = {"id": "x", "prompt_token_ids": [1, 2],
            "choices": [{"index": 0, "token_ids": [7, 9], "logprobs": lp}]}  # fmt: skip
    record, changed = capture.take_body(body)
    assert changed and body == {"id": "x", "choices": [{"index": 0, "logprobs": None}]}
    # the end-of-sequence id has no logprob: None, one per id
    assert record == {"prompt_ids": [1, 2], "completion_ids": [7, 9],
                      "completion_logprobs": [-0.5, None], "render": "server"}  # fmt: skip


def test_stream_chunks_are_collected_in_order() -> None:
    capture = ServerCapture(strip_ids=True, strip_logprobs=False)
    chunks: list[dict[str, Any]] = [
        {"prompt_token_ids": [1], "choices": [{"index": 0, "token_ids": [5]}]},
        {"choices": [{"index": 0, "token_ids": [6, 7]}]},
        {"choices": [], "usage": {"prompt_tokens": 1}},
    ]
    for chunk in chunks:
        capture.take_chunk(chunk)
    assert chunks[0] == {"choices": [{"index": 0}]}
    record = capture.record()
    assert record is not None and record["completion_ids"] == [5, 6, 7]
    assert record["prompt_ids"] == [1]


def test_a_server_that_sent_no_ids_is_said_so() -> None:
    capture = ServerCapture(strip_ids=True, strip_logprobs=False)
    assert capture.take_body({"choices": [{"index": 0, "message": {}}]}) == (None, False)
    assert "capture_problems" in captured_fields(None)
    # more logprobs than ids cannot be paired: none recorded rather than wrong ones
    lp = {"content": [{"logprob": -1.0}, {"logprob": -2.0}]}
    record, _ = capture.take_body({"prompt_token_ids": [1],
                                   "choices": [{"token_ids": [3], "logprobs": lp}]})  # fmt: skip
    assert record is not None and record["completion_logprobs"] is None
