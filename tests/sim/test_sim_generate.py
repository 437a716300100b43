"""``/inference/v1/generate`` (vLLM) and ``/generate`` (SGLang): the same answers as
``/v1/completions`` in each engine's own shape, stream and not."""

from __future__ import annotations

from typing import Any

import aiohttp

from rolltap.sim import Simulator
from rolltap.sim.completions_in import TokenPrompt, answer_tokens
from rolltap.sim.vocab import VOCAB
from sim.simkit import json_events, prompt_ids, read_events

IDS = prompt_ids()


def _expected(sim: Simulator, **prompt: Any) -> Any:
    return answer_tokens(TokenPrompt(model=sim.config.model, ids=tuple(IDS), **prompt), sim.config)


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with session.post(url, json=body) as resp:
        assert resp.status == 200, await resp.text()
        if body.get("stream"):
            return json_events(await read_events(resp))
        return await resp.json()


async def test_vllm_generate_answers_ids_and_logprobs(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"token_ids": IDS, "sampling_params": {"max_tokens": 64, "logprobs": 0}}
    reply = await _post(session, sim.url + "/inference/v1/generate", body)
    want = _expected(sim, max_tokens=64)
    (choice,) = reply["choices"]
    assert choice["token_ids"] == list(want.ids) and choice["token_ids"][-1] == VOCAB.eos
    assert [c["logprob"] for c in choice["logprobs"]["content"]] == list(want.logprobs)
    assert choice["finish_reason"] == "stop" and "text" not in choice
    assert reply["usage"]["completion_tokens"] == len(want.ids)
    # no logprobs unless asked; max_tokens caps the ids
    reply = await _post(session, sim.url + "/inference/v1/generate",
                        {"token_ids": IDS, "sampling_params": {"max_tokens": 3}})  # fmt: skip
    (choice,) = reply["choices"]
    assert choice["logprobs"] is None and len(choice["token_ids"]) == 3
    assert choice["finish_reason"] == "length"


async def test_vllm_generate_streams_one_id_per_chunk(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"token_ids": IDS, "stream": True, "sampling_params": {"logprobs": 0}}
    chunks = await _post(session, sim.url + "/inference/v1/generate", body)
    want = _expected(sim)
    ids = [i for c in chunks for i in c["choices"][0]["token_ids"]]
    assert ids == list(want.ids)
    assert [c["choices"][0]["finish_reason"] for c in chunks][-2:] == [None, "stop"]


async def test_sglang_answers_output_ids_and_meta_info(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"input_ids": IDS, "return_logprob": True,
            "sampling_params": {"max_new_tokens": 64, "stop_token_ids": [VOCAB.eos]}}  # fmt: skip
    reply = await _post(session, sim.url + "/generate", body)
    want = _expected(sim, max_tokens=64)
    assert reply["output_ids"] == list(want.ids)
    meta = reply["meta_info"]
    assert meta["output_token_logprobs"] == [[lp, i, None] for lp, i in zip(
        want.logprobs, want.ids, strict=True)]  # fmt: skip
    assert meta["finish_reason"] == {"type": "stop", "matched": VOCAB.eos}
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (len(IDS), len(want.ids))
    reply = await _post(session, sim.url + "/generate",
                        {"input_ids": IDS, "sampling_params": {"max_new_tokens": 2}})  # fmt: skip
    assert "output_token_logprobs" not in reply["meta_info"]
    assert reply["meta_info"]["finish_reason"] == {"type": "length", "length": 2}


async def test_sglang_stream_chunks_are_cumulative(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    body = {"input_ids": IDS, "stream": True, "return_logprob": True}
    chunks = await _post(session, sim.url + "/generate", body)
    want = _expected(sim)
    assert [len(c["output_ids"]) for c in chunks] == list(range(1, len(want.ids) + 1))
    assert chunks[-1]["output_ids"] == list(want.ids)
    assert [c["meta_info"]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "stop"


async def test_the_abort_cue_answers_an_aborted_generation(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    cue = {"sim_abort": True}
    sgl = await _post(session, sim.url + "/generate", {"input_ids": IDS, "sampling_params": cue})
    assert sgl["meta_info"]["finish_reason"]["type"] == "abort" and sgl["output_ids"] == []
    body = {"token_ids": IDS, "sampling_params": cue}
    vllm = await _post(session, sim.url + "/inference/v1/generate", body)
    assert vllm["choices"][0]["finish_reason"] == "abort"


async def test_missing_prompt_ids_are_a_400(sim: Simulator, session: aiohttp.ClientSession) -> None:
    for path, body in (("/generate", {"text": "hi"}), ("/inference/v1/generate", {"prompt": "x"})):
        async with session.post(sim.url + path, json=body) as resp:
            assert resp.status == 400
