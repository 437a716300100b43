"""Chat completion responses <-> canonical: token ids, logprobs, stop reasons."""

from __future__ import annotations

import copy
from typing import Any

import openai.types.chat
import orjson
import pytest

from rolltap.dialects.canonical import (
    Reasoning,
    Text,
)
from rolltap.dialects.chat import dialect as chat
from rolltap.errors import UpstreamProtocolError

VLLM_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-9",
    "object": "chat.completion",
    "created": 1730000000,
    "model": "qwen3-8b",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "The answer is 4",
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": "2+2=4",
            },
            "logprobs": {
                "content": [
                    {"token": "The", "logprob": -0.01, "bytes": [84, 104, 101], "top_logprobs": []}
                ]
            },
            "finish_reason": "stop",
            "stop_reason": "</answer>",
            "token_ids": [785, 4226, 374, 220, 19],
        }
    ],
    "service_tier": None,
    "system_fingerprint": None,
    "usage": {
        "prompt_tokens": 30,
        "total_tokens": 40,
        "completion_tokens": 10,
        "prompt_tokens_details": None,
    },
    "prompt_logprobs": None,
    "prompt_token_ids": [151644, 872, 198],
    "kv_transfer_params": None,
}


def test_vllm_response_keeps_token_ids_and_logprobs() -> None:
    resp = chat.response_to_canonical(copy.deepcopy(VLLM_RESPONSE))
    assert resp.parts == (Reasoning("2+2=4"), Text("The answer is 4"))
    assert (resp.stop_reason, resp.stop_sequence) == ("stop_sequence", "</answer>")
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cache_read_tokens) == (
        30,
        10,
        None,
    )
    assert resp.extra["prompt_token_ids"] == [151644, 872, 198]
    assert resp.extra["choices"][0]["token_ids"] == [785, 4226, 374, 220, 19]
    assert resp.extra["choices"][0]["logprobs"]["content"][0]["token"] == "The"
    assert resp.origin == "chat"
    body = chat.response_from_canonical(resp)
    assert body == VLLM_RESPONSE
    openai.types.chat.ChatCompletion.model_validate(body)


def test_llama_cpp_timings_and_extra_choices_survive() -> None:
    body: dict[str, Any] = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "gemma",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "a"},
                "finish_reason": "length",
            },
            {"index": 1, "message": {"role": "assistant", "content": "b"}, "finish_reason": "stop"},
        ],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 1,
            "total_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
        "timings": {"prompt_n": 3, "predicted_per_second": 50.0},
    }
    resp = chat.response_to_canonical(copy.deepcopy(body))
    assert (resp.stop_reason, resp.usage.cache_read_tokens) == ("max_tokens", 2)
    rendered = chat.response_from_canonical(resp)
    assert rendered["choices"][1] == body["choices"][1]
    assert rendered["timings"] == body["timings"]
    assert rendered["choices"][0]["message"] == body["choices"][0]["message"]


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "content_filter"),
        (None, None),
        ("abort", None),
    ],
)
def test_finish_reasons(finish: str | None, stop: str | None) -> None:
    body = {
        "id": "c",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": finish}
        ],
    }
    resp = chat.response_to_canonical(body)
    assert resp.stop_reason == stop
    assert chat.response_from_canonical(resp)["choices"][0]["finish_reason"] == finish


def test_malformed_response_is_a_protocol_error() -> None:
    with pytest.raises(UpstreamProtocolError, match="choices"):
        chat.response_to_canonical({"id": "c", "model": "m"})


def test_upstream_error_detail() -> None:
    assert chat.upstream_error_detail(b'{"error": {"message": "bad", "code": 400}}') == {
        "message": "bad",
        "code": 400,
    }
    vllm = {"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}
    assert chat.upstream_error_detail(orjson.dumps(vllm)) == vllm
    assert chat.upstream_error_detail(b"<html>") is None
    assert chat.upstream_error_detail(b"[1]") is None
