"""The ``/generate`` wire flavors: request bodies and answers, well-formed and not."""

from __future__ import annotations

from typing import Any

import pytest

from rolltap.clients.completions import (
    COMPLETIONS_PATHS,
    CompletionsFlavor,
    completions_body,
    continued_body,
    parse_completion,
)
from rolltap.dialects.canonical import Usage
from rolltap.errors import UpstreamProtocolError

OPTIONS = {"max_tokens": 8, "temperature": 0.5, "seed": 3, "stop": ["END"]}


def test_request_bodies_put_sampling_under_each_engines_names() -> None:
    vllm = completions_body("vllm-generate", model="m", prompt_ids=[1, 2], options=OPTIONS)
    assert vllm == {"model": "m", "token_ids": [1, 2], "stream": False,
                    "sampling_params": {**OPTIONS, "logprobs": 0}}  # fmt: skip
    sgl = completions_body("sglang", model="m", prompt_ids=[1, 2], options=OPTIONS, stop_ids=[9])
    assert sgl == {
        "input_ids": [1, 2], "return_logprob": True, "stream": False,
        "sampling_params": {"max_new_tokens": 8, "temperature": 0.5, "sampling_seed": 3,
                            "stop": ["END"], "stop_token_ids": [9], "skip_special_tokens": False},
    }  # fmt: skip
    assert COMPLETIONS_PATHS["vllm-generate"] == "/inference/v1/generate"
    assert COMPLETIONS_PATHS["sglang"] == "/generate"


def _vllm(**choice: Any) -> dict[str, Any]:
    return {"request_id": "r1", "choices": [{"token_ids": [4, 5], "finish_reason": "stop",
                                             "logprobs": None, **choice}]}  # fmt: skip


def test_vllm_generate_counts_from_ids_without_usage_and_reads_usage_with() -> None:
    done = parse_completion("vllm-generate", _vllm(), prompt_len=7)
    assert (done.text, done.ids, done.logprobs) == (None, (4, 5), None)
    assert (done.usage, done.stop_reason, done.id) == (Usage(7, 2), "end_turn", "r1")
    body = {**_vllm(finish_reason="length", logprobs={"content": [
        {"logprob": -0.5}, {"logprob": -1.0}]}),
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}}  # fmt: skip
    done = parse_completion("vllm-generate", body, prompt_len=7)
    assert (done.usage, done.stop_reason) == (Usage(3, 2), "max_tokens")
    assert done.logprobs == (-0.5, -1.0)


def _sgl(finish: Any, **meta: Any) -> dict[str, Any]:
    return {"output_ids": [4, 5], "meta_info": {
        "id": "s1", "prompt_tokens": 3, "completion_tokens": 2, "finish_reason": finish,
        "output_token_logprobs": [[-0.5, 4, None], [-1.0, 5, "x"]], **meta}}  # fmt: skip


@pytest.mark.parametrize(("finish", "stop"), [
    ({"type": "stop", "matched": 5}, "end_turn"),
    ({"type": "stop", "matched": "END"}, "stop_sequence"),
    ({"type": "length", "length": 2}, "max_tokens"),
])  # fmt: skip
def test_sglang_finish_reasons(finish: Any, stop: str) -> None:
    done = parse_completion("sglang", _sgl(finish))
    assert (done.ids, done.logprobs, done.usage) == ((4, 5), (-0.5, -1.0), Usage(3, 2))
    assert done.stop_reason == stop and done.text is None


@pytest.mark.parametrize(("flavor", "body"), [
    ("sglang", _sgl({"type": "abort", "message": "dropped"})),
    ("vllm-generate", _vllm(finish_reason="abort")),
    ("vllm", {"id": "c1", "choices": [{"text": "ab", "finish_reason": "abort", "token_ids": [4, 5],
                                       "logprobs": {"token_logprobs": [-0.5, -1.0]}}]}),
])  # fmt: skip
def test_an_abort_is_a_partial_completion_not_an_error(flavor: Any, body: dict[str, Any]) -> None:
    """The ids sampled before the abort are kept, to be continued (no stop reason)."""
    done = parse_completion(flavor, body)
    assert done.aborted and done.ids == (4, 5) and done.stop_reason is None
    assert not parse_completion(
        flavor,
        _sgl({"type": "length"})
        if flavor == "sglang"
        else {**body, "choices": [{**body["choices"][0], "finish_reason": "length"}]},
    ).aborted


@pytest.mark.parametrize(("flavor", "body"), [
    ("sglang", _sgl({"type": "stop"}, weight_version="step-3")),
    ("vllm-generate", {**_vllm(), "metadata": {"weight_version": 4}}),
    ("vllm", {"choices": [{"text": "", "token_ids": [], "finish_reason": "stop", "logprobs": {}}],
              "metadata": {"weight_version": "w"}}),
])  # fmt: skip
def test_the_engines_weight_version_is_read(flavor: Any, body: dict[str, Any]) -> None:
    version = body.get("metadata", body.get("meta_info", {})).get("weight_version")
    assert parse_completion(flavor, body).weight_version == str(version)
    assert parse_completion("sglang", _sgl({"type": "stop"})).weight_version is None


def test_a_continued_body_asks_for_the_rest_of_the_budget() -> None:
    options = {"max_tokens": 8, "temperature": 0.5}
    top: list[tuple[CompletionsFlavor, str, str]] = [
        ("vllm", "prompt", "max_tokens"),
        ("llamacpp", "prompt", "n_predict"),
    ]
    nested: list[tuple[CompletionsFlavor, str, str]] = [
        ("vllm-generate", "token_ids", "max_tokens"),
        ("sglang", "input_ids", "max_new_tokens"),
    ]
    for flavor, ids, budget in top:
        first = completions_body(flavor, model="m", prompt_ids=[1, 2], options=options)
        later = continued_body(flavor, first, prompt_ids=[1, 2, 7], max_tokens=5)
        assert (later[ids], later[budget], first[ids], first[budget]) == ([1, 2, 7], 5, [1, 2], 8)
        assert {k: v for k, v in later.items() if k not in (ids, budget)} == {
            k: v for k, v in first.items() if k not in (ids, budget)}  # fmt: skip
    for flavor, ids, budget in nested:
        first = completions_body(flavor, model="m", prompt_ids=[1, 2], options=options)
        later = continued_body(flavor, first, prompt_ids=[1, 2, 7], max_tokens=5)
        assert (later[ids], later["sampling_params"][budget]) == ([1, 2, 7], 5)
        assert first["sampling_params"][budget] == 8  # the first body is left as sent


@pytest.mark.parametrize(("flavor", "body"), [
    ("vllm-generate", {"choices": []}),
    ("vllm-generate", _vllm(token_ids=[1, True])),
    ("vllm-generate", _vllm(logprobs={"content": [{"logprob": -1.0}]})),  # 1 for 2 ids
    ("sglang", {"output_ids": [1]}),
    ("sglang", _sgl(None, output_token_logprobs=[[-0.5, 4, None]])),  # 1 for 2 ids
    ("sglang", _sgl(None, prompt_tokens="many")),
])  # fmt: skip
def test_malformed_answers_are_bad_responses(flavor: Any, body: dict[str, Any]) -> None:
    with pytest.raises(UpstreamProtocolError, match="missing token ids"):
        parse_completion(flavor, body)
