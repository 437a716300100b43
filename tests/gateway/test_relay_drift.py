"""Token drift on a chat relay with server-side token capture (``capture_tokens``): the
official OpenAI SDK as harness, the gateway, the simulator answering ``return_token_ids``
as vLLM does. A server that re-tokenizes its history, a template that drops earlier
reasoning and a harness that rewrites history each make a server-rendered prompt that
does not extend the previous prompt + completion: recorded as ``tokens.drift`` where the
sequences part, with the reason, and counted in ``/stats`` and ``/metrics``; a plain
conversation reports none."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import pytest

from gateway.simtok import drift_counts, drift_window
from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator
from rolltap.sim.vocab import VOCAB

FIRST = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"


async def _conversation(
    sim_config: SimConfig, http: aiohttp.ClientSession, *, stream: bool,
    rewrite: bool = False, capture: bool = True, send_reasoning: bool = False,
) -> tuple[list[dict[str, Any]], list[str], tuple[int, str]]:  # fmt: skip
    """Two turns (the second resends the first's answer, without its reasoning unless
    ``send_reasoning``; with ``rewrite``, its first message edited): the response events'
    token records, the answers' texts, and the gateway's drift counts (``/stats``,
    ``/metrics``)."""
    async with Simulator(sim_config) as sim:
        endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", capture_tokens=capture)
        async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
            rollout = await register(http, gateway)
            messages: list[Any] = [{"role": "user", "content": "hello"}]
            texts: list[str] = []
            async with openai_client(rollout) as client:
                for follow_up in ("go on", "more"):
                    text, thought = await _ask(client, messages, stream=stream)
                    texts.append(text)
                    answer = {"role": "assistant", "content": text}
                    if send_reasoning:
                        assert thought
                        answer["reasoning_content"] = thought
                    messages += [answer, {"role": "user", "content": follow_up}]
                    if rewrite:
                        messages[0] = {"role": "user", "content": "bye"}
            evs = await events(http, gateway, rollout["id"])
            counts = await drift_counts(http, gateway)
    records = [e["payload"].get("tokens") for e in evs if e["kind"] == "model_response"]
    return records, texts, counts


async def _ask(client: Any, messages: list[Any], *, stream: bool) -> tuple[str, str]:
    """The answer's text and its reasoning (vLLM's ``reasoning_content``; "" without)."""
    if not stream:
        reply = await client.chat.completions.create(model="m", messages=messages)
        message = reply.choices[0].message
        return str(message.content), str(getattr(message, "reasoning_content", None) or "")
    chunks = await client.chat.completions.create(model="m", messages=messages, stream=True)
    deltas = [c.choices[0].delta async for c in chunks if c.choices]
    thought = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
    return "".join(d.content or "" for d in deltas), thought


def _expect_drift(records: list[dict[str, Any]], at: int, reason: str) -> None:
    first, second = records
    assert "drift" not in first
    expected = first["prompt_ids"] + first["completion_ids"]
    got = second["prompt_ids"]
    assert expected[:at] == got[:at] and expected[at] != got[at]
    assert second["drift"] == {
        "at": at, "expected": drift_window(expected, at), "got": drift_window(got, at),
        "reason": reason,
    }  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
async def test_a_plain_conversation_extends_and_reports_no_drift(
    stream: bool, http: aiohttp.ClientSession
) -> None:
    records, _, counts = await _conversation(SimConfig(seed=7), http, stream=stream)
    first, second = records
    assert first["prompt_ids"] == VOCAB.encode(FIRST)
    assert second["prompt_ids"][: len(first["prompt_ids"]) + len(first["completion_ids"])] == (
        first["prompt_ids"] + first["completion_ids"]
    )
    assert "drift" not in first and "drift" not in second
    assert counts == (0, "rolltap_token_drift_total 0.0")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_that_retokenizes_its_history_drifts_where_the_answer_was(
    stream: bool, http: aiohttp.ClientSession
) -> None:
    """The answer's words come back as byte tokens: the same text, other ids, from the
    first id of the answer on."""
    config = SimConfig(seed=7, retokenize_history=True)
    records, texts, counts = await _conversation(config, http, stream=stream)
    at = len(VOCAB.encode(FIRST))
    _expect_drift(records, at, "retokenized")
    assert records[1]["prompt_ids"][at : at + 2] == VOCAB.encode_bytes(texts[0])[:2]
    assert counts == (1, "rolltap_token_drift_total 1.0")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_template_that_drops_reasoning_drifts_where_the_thought_was(
    stream: bool, http: aiohttp.ClientSession
) -> None:
    """A reasoning model: the harness resends the answer without its thought, the
    template renders none, so the prompt parts where the thought's ids were sampled."""
    config = SimConfig(seed=7, reasoning_tokens=3)
    records, _, counts = await _conversation(config, http, stream=stream)
    at = len(VOCAB.encode(FIRST))
    _expect_drift(records, at, "reasoning_dropped")
    assert records[0]["completion_ids"][0] == VOCAB.id_of("<think>")
    assert counts == (1, "rolltap_token_drift_total 1.0")


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_sent_back_but_not_rendered_is_dropped_reasoning(
    stream: bool, http: aiohttp.ClientSession
) -> None:
    """The harness resends the thought (``reasoning_content``); the template renders none
    of it: the prompt goes on with the answer's ids where the thought's were."""
    config = SimConfig(seed=7, reasoning_tokens=3)
    records, _, _ = await _conversation(config, http, stream=stream, send_reasoning=True)
    _expect_drift(records, len(VOCAB.encode(FIRST)), "reasoning_dropped")


async def test_reasoning_sent_back_and_the_answer_retokenized_is_retokenized(
    http: aiohttp.ClientSession,
) -> None:
    """The same, and the answer spelled in other ids: its end does not line up, so the
    ids read as re-tokenized (the messages extend)."""
    config = SimConfig(seed=7, reasoning_tokens=3, retokenize_history=True)
    records, _, _ = await _conversation(config, http, stream=False, send_reasoning=True)
    _expect_drift(records, len(VOCAB.encode(FIRST)), "retokenized")


async def test_a_harness_that_rewrites_history_drifts_where_it_edited(
    http: aiohttp.ClientSession,
) -> None:
    records, _, counts = await _conversation(SimConfig(seed=7), http, stream=False, rewrite=True)
    _expect_drift(records, len(VOCAB.encode("<|im_start|>user\n")), "history_rewritten")
    assert counts == (1, "rolltap_token_drift_total 1.0")


async def test_without_capture_nothing_is_checked(http: aiohttp.ClientSession) -> None:
    config = SimConfig(seed=7, retokenize_history=True)
    records, _, counts = await _conversation(config, http, stream=False, capture=False)
    assert records == [None, None]
    assert counts == (0, "rolltap_token_drift_total 0.0")


async def test_a_translated_conversation_is_checked_too(http: aiohttp.ClientSession) -> None:
    """An Anthropic harness in front of the chat upstream: the server's ids are checked
    the same way, the conversation index read in the harness's dialect."""
    async with Simulator(SimConfig(seed=7, retokenize_history=True)) as sim:
        endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", capture_tokens=True)
        async with Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN)) as gateway:
            rollout = await register(http, gateway)
            messages: list[Any] = [{"role": "user", "content": "hello"}]
            async with anthropic.AsyncAnthropic(
                base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0
            ) as client:
                for follow_up in ("go on", "more"):
                    reply = await client.messages.create(
                        model="m", max_tokens=64, messages=messages
                    )
                    text = "".join(b.text for b in reply.content if b.type == "text")
                    messages += [{"role": "assistant", "content": text},
                                 {"role": "user", "content": follow_up}]  # fmt: skip
            evs = await events(http, gateway, rollout["id"])
    records = [e["payload"]["tokens"] for e in evs if e["kind"] == "model_response"]
    _expect_drift(records, len(VOCAB.encode(FIRST)), "retokenized")
