"""Token drift through the gateway: the token client, the simulator as upstream, the
OpenAI SDK as harness. A harness that rewrites history makes a prompt that does not
extend the previous prompt + completion: recorded as ``tokens.drift`` where the sequences
part, with the reason, and counted in ``/stats`` and ``/metrics``. A Qwen3-style template
that drops earlier reasoning does not: the sampled reasoning stays in the sequence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from transformers import AutoTokenizer

from gateway.simtok import (
    ADD_TOOLS,
    QWEN3_TEMPLATE,
    TEMPLATE,
    build_sim_tokenizer,
    drift_counts,
    drift_window,
)
from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator


@pytest.fixture
async def thinking_sim() -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=7, reasoning_tokens=5)) as simulator:
        yield simulator


async def _gateway(sim: Simulator, tokenizer: Path) -> Gateway:
    config = EndpointConfig(
        base_url=sim.base_url, model="sim-model", client="tokens", tokenizer=str(tokenizer),
        reasoning_parser="think",
    )  # fmt: skip
    gateway = Gateway(config, GatewaySettings(admin_token=ADMIN_TOKEN))
    await gateway.start()
    return gateway


def _kind(evs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in evs if e["kind"] == kind]


async def test_a_harness_that_rewrites_history_drifts_where_it_edited(
    sim: Simulator, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    tokenizer_dir = build_sim_tokenizer(tmp_path / "tok")
    gateway = await _gateway(sim, tokenizer_dir)
    try:
        rollout = await register(http, gateway)
        messages: list[Any] = [{"role": "user", "content": "add one and one"}]
        async with openai_client(rollout) as client:
            for follow_up in ("go on", "more"):  # the second call extends the first
                reply = await client.chat.completions.create(model="m", messages=messages)
                messages += [reply.choices[0].message.model_dump(exclude_none=True),
                             {"role": "user", "content": follow_up}]  # fmt: skip
            messages[0] = {"role": "user", "content": "add one and two"}  # edited turn 1
            await client.chat.completions.create(model="m", messages=messages)
        evs = await events(http, gateway, rollout["id"])
        counts = await drift_counts(http, gateway)
    finally:
        await gateway.aclose()
    first, second, third = (r["tokens"] for r in _kind(evs, "model_response"))
    assert "drift" not in first and "drift" not in second and second["render"] == "extend"
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    # the sequences part at the first id of the edited word
    at = len(tok.encode("<|im_start|>user\nadd one and ", add_special_tokens=False))
    expected = second["prompt_ids"] + second["completion_ids"]
    assert third["render"] == "full" and third["reason"] == "history_rewritten"
    assert third["drift"] == {
        "at": at, "expected": drift_window(expected, at),
        "got": drift_window(third["prompt_ids"], at),
        "reason": "history_rewritten",
    }  # fmt: skip
    assert expected[:at] == third["prompt_ids"][:at] != []
    assert expected[at] != third["prompt_ids"][at]
    # the request event says so before the call is made, in the same words
    assert _kind(evs, "model_request")[2]["tokens"]["drift"] == third["drift"]
    assert "drift" not in _kind(evs, "model_request")[1]["tokens"]
    assert counts == (1, "rolltap_token_drift_total 1.0")


async def test_reasoning_a_template_drops_stays_in_the_sequence_without_drift(
    thinking_sim: Simulator, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    assert QWEN3_TEMPLATE.count("ns.last_user") == 2 and QWEN3_TEMPLATE != TEMPLATE
    tokenizer_dir = build_sim_tokenizer(tmp_path / "tok", QWEN3_TEMPLATE)
    gateway = await _gateway(thinking_sim, tokenizer_dir)
    try:
        rollout = await register(http, gateway)
        messages: list[Any] = [{"role": "user", "content": "add one"}]
        reasoning = []
        async with openai_client(rollout) as client:
            for _ in range(3):
                reply = await client.chat.completions.create(
                    model="m", messages=messages, tools=ADD_TOOLS
                )
                message = reply.choices[0].message
                reasoning.append((message.model_extra or {}).get("reasoning_content"))
                messages.append(message.model_dump(exclude_none=True))
                if message.tool_calls:
                    call = message.tool_calls[0]
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": "2"})
                else:  # a new user turn: the template drops the reasoning before it
                    messages.append({"role": "user", "content": "again"})
        evs = await events(http, gateway, rollout["id"])
        counts = await drift_counts(http, gateway)
    finally:
        await gateway.aclose()
    first, second, third = (r["tokens"] for r in _kind(evs, "model_response"))
    assert _kind(evs, "model_response")[0]["finish_reason"] == "tool_calls"
    assert _kind(evs, "model_response")[1]["finish_reason"] == "stop"
    assert all(isinstance(r, str) and len(r.split()) == 5 for r in reasoning)
    # in the tool loop the template renders the reasoning: the sampled ids stay, no drift
    sampled = first["prompt_ids"] + first["completion_ids"]
    assert second["render"] == "extend" and "drift" not in second
    assert second["prompt_ids"][: len(sampled)] == sampled
    # after "again" the template would drop both; the sequence keeps what was sampled
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    assert tok.decode(first["completion_ids"][:1]) == "<think>"
    expected = second["prompt_ids"] + second["completion_ids"]
    assert third["render"] == "extend" and "drift" not in third
    assert third["prompt_ids"][: len(expected)] == expected
    text = str(tok.decode(third["prompt_ids"]))
    assert all(isinstance(r, str) and r in text for r in reasoning[:2])
    assert text.endswith("again<|im_end|>\n<|im_start|>assistant\n")
    assert counts == (0, "rolltap_token_drift_total 0.0")
