"""The toy vocabulary, token answers, and llama.cpp's native ``POST /completion``."""

from __future__ import annotations

import dataclasses
from typing import Any

import aiohttp
import orjson
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rolltap.sim import SimConfig, Simulator
from rolltap.sim.completions import COMPLETIONS
from rolltap.sim.completions_in import TokenPrompt, answer_tokens, text_pieces
from rolltap.sim.content import BadRequest
from rolltap.sim.llamacpp import LLAMACPP
from rolltap.sim.vocab import SPECIAL_TOKENS, VOCAB
from rolltap.sim.words import WORDS
from sim.simkit import llamacpp_body, prompt_ids, read_events

_IDS = st.lists(st.integers(0, len(VOCAB) - 1), min_size=1, max_size=40)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**64) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_BODY = st.fixed_dictionaries(
    {},
    optional={
        "prompt": _IDS | st.text(max_size=20) | _JSON,
        "max_tokens": _JSON, "n_predict": _JSON, "logprobs": _JSON, "n_probs": _JSON,
        "stop": _JSON | st.lists(st.text(max_size=3), max_size=2),
        "stream": st.booleans(), "stream_options": _JSON, "return_token_ids": _JSON,
        "return_tokens_as_token_ids": _JSON, "return_tokens": _JSON, "model": _JSON,
        "echo": _JSON, "n": _JSON,
    },
)  # fmt: skip


def test_vocabulary_layout() -> None:
    w = len(WORDS)
    assert [VOCAB.token(i) for i in (0, w - 1, w, 2 * w)] == [
        WORDS[0],
        WORDS[-1],
        " " + WORDS[0],
        SPECIAL_TOKENS[0],
    ]
    assert len(VOCAB) == 2 * w + len(SPECIAL_TOKENS) + 256
    assert VOCAB.encode(f"{WORDS[3]} {WORDS[4]}<tools>") == [3, w + 4, VOCAB.id_of("<tools>")]
    assert VOCAB.token(len(VOCAB) - 1) == "<0xFF>"
    with pytest.raises(IndexError):
        VOCAB.token(len(VOCAB))


@given(text=st.text())
def test_encode_decode_round_trips(text: str) -> None:
    assert VOCAB.decode(VOCAB.encode(text), skip_control=False) == text


def test_control_tokens_are_left_out_of_text() -> None:
    ids = VOCAB.encode("<|im_start|>the<|im_end|><think>x</think>")
    assert VOCAB.decode(ids) == "the<think>x</think>"


def test_a_split_character_streams_with_its_last_byte() -> None:
    answer = answer_tokens(TokenPrompt("m", (1,), max_tokens=0), SimConfig())
    euro = VOCAB.encode("€")
    split = dataclasses.replace(answer, ids=(*euro, 0), text="€the")
    assert text_pieces(split) == ["", "", "€", "the"]


@given(ids=_IDS, cap=st.none() | st.integers(0, 30), seed=st.integers(0, 3))
def test_answers_are_deterministic_and_consistent(
    ids: list[int], cap: int | None, seed: int
) -> None:
    # word answers only: a prompt holding the tool marker is answered with a tool call,
    # longer than the word budget (tested on its own)
    config = SimConfig(seed=seed, tool_marker=None)
    answer = answer_tokens(TokenPrompt("m", tuple(ids), max_tokens=cap), config)
    assert answer == answer_tokens(TokenPrompt("m", tuple(ids), max_tokens=cap), config)
    assert len(answer.logprobs) == len(answer.ids) <= (17 if cap is None else min(cap, 17))
    assert answer.text == VOCAB.decode(answer.ids) == "".join(text_pieces(answer))
    natural = bool(answer.ids) and answer.ids[-1] == VOCAB.eos
    assert answer.finish == ("stop" if natural else "length")


@given(seed=st.integers(0, 3), cut=st.integers(1, 16), cap=st.none() | st.integers(1, 30))
def test_a_cut_answer_sent_back_is_finished(seed: int, cut: int, cap: int | None) -> None:
    # a chat prompt ends with its generation prompt (``\n``, not a word); sent again with
    # the ids an abort left, the answer is the rest of the uncut one (abort and continue)
    config = SimConfig(seed=seed, tool_marker=None)
    prompt = tuple(VOCAB.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"))
    whole = answer_tokens(TokenPrompt("m", prompt), config)
    assert len(whole.ids) == 17 and whole.ids[-1] == VOCAB.eos
    rest = answer_tokens(TokenPrompt("m", (*prompt, *whole.ids[:cut]), max_tokens=cap), config)
    left = 17 - cut if cap is None else min(cap, 17 - cut)
    assert rest.ids == whole.ids[cut:][:left]
    assert rest.logprobs == whole.logprobs[cut:][:left]
    assert rest.finish == ("stop" if rest.ids[-1] == VOCAB.eos else "length")
    # words that are not the answer's start are a new prompt: answered afresh, in full
    other = (*prompt, (whole.ids[0] + 1) % len(WORDS))
    assert len(answer_tokens(TokenPrompt("m", other), config).ids) == 17


def test_a_cut_answer_is_finished_after_its_first_is_forgotten() -> None:
    # the simulator keeps the answers it drew lately; one pushed out by 300 others is
    # drawn again for its continuation, the same
    config = SimConfig(seed=7, tool_marker=None)
    head = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    prompt = tuple(VOCAB.encode(head.format("hi")))
    whole = answer_tokens(TokenPrompt("m", prompt), config)
    for n in range(300):
        question = f"{WORDS[n % len(WORDS)]} {WORDS[n // len(WORDS)]}"
        answer_tokens(TokenPrompt("m", tuple(VOCAB.encode(head.format(question)))), config)
    rest = answer_tokens(TokenPrompt("m", (*prompt, *whole.ids[:5])), config)
    assert (rest.ids, rest.logprobs) == (whole.ids[5:], whole.logprobs[5:])


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=60)
@given(body=_BODY)
def test_any_body_is_answered_or_refused(body: dict[str, Any]) -> None:
    for dialect in (COMPLETIONS, LLAMACPP):
        try:
            plan = dialect.plan(body, SimConfig())
        except BadRequest:
            continue
        holes = dialect.holes(1, 0)
        rendered = [e.render(holes) for e in plan.events] if plan.stream else []
        for event in rendered:
            if event != b"data: [DONE]\n\n":
                orjson.loads(event.removeprefix(b"data: "))
        if not plan.stream:
            orjson.loads(plan.body.render(holes))


def test_tool_marker_must_be_a_token() -> None:
    with pytest.raises(pydantic.ValidationError):
        SimConfig(tool_marker="<nope>")


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with session.post(url, json=body) as resp:
        assert resp.status == 200
        return await resp.json()


async def test_llamacpp_completion(sim: Simulator, session: aiohttp.ClientSession) -> None:
    url = sim.url + "/completion"
    reply = await _post(session, url, llamacpp_body(return_tokens=True, n_probs=2))
    ids = prompt_ids()
    assert reply["tokens"][-1] == VOCAB.eos and reply["content"] == VOCAB.decode(reply["tokens"])
    assert (reply["stop"], reply["stop_type"], reply["stopping_word"]) == (True, "eos", "")
    assert (reply["tokens_evaluated"], reply["tokens_predicted"]) == (len(ids), 17)
    assert reply["prompt"] == VOCAB.decode(ids, skip_control=False)
    first = reply["completion_probabilities"][0]
    assert (first["id"], first["token"]) == (reply["tokens"][0], VOCAB.token(reply["tokens"][0]))
    assert bytes(first["bytes"]).decode() == first["token"]
    assert first["top_logprobs"][0]["id"] == first["id"]
    assert len(first["top_logprobs"]) == 2
    capped = await _post(session, url, llamacpp_body(n_predict=2))
    assert (capped["stop_type"], capped["tokens"], capped["tokens_predicted"]) == ("limit", [], 2)
    assert "completion_probabilities" not in capped
    stop = reply["content"].split(" ")[1]
    stopped = await _post(session, url, llamacpp_body(stop=[stop]))
    assert (stopped["stop_type"], stopped["stopping_word"]) == ("word", stop)
    assert stopped["content"] == reply["content"][: reply["content"].index(stop)]


async def test_llamacpp_stream(sim: Simulator, session: aiohttp.ClientSession) -> None:
    body = llamacpp_body(stream=True, return_tokens=True, n_probs=1, n_predict=4)
    async with session.post(sim.url + "/completion", json=body) as resp:
        events = [orjson.loads(e) for e in await read_events(resp)]
    *tokens, final = events
    whole = await _post(session, sim.url + "/completion", llamacpp_body(n_predict=4))
    assert "".join(e["content"] for e in tokens) == whole["content"]
    assert [e["tokens_predicted"] for e in tokens] == [1, 2, 3, 4]
    assert all(not e["stop"] and len(e["completion_probabilities"]) == 1 for e in tokens)
    assert (final["stop"], final["content"], final["stop_type"]) == (True, "", "limit")
