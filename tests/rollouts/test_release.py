"""A long agent's history is held once, in the store: once a rollout's request bodies
reach the recorder's bound, the messages of its durable request events leave memory, and
whoever needs the whole history (a reward, the admin API) gets it read back, unchanged."""

from __future__ import annotations

from pathlib import Path

import orjson

import rolltap
from rolltap.rollouts import RunConfig
from rolltap.rollouts.recorder import RELEASE_OVER_BYTES
from rolltap.sim import Simulator
from rolltap.store import Store


async def test_a_reward_gets_the_released_history_whole(sim: Simulator, tmp_path: Path) -> None:
    chunk = RELEASE_OVER_BYTES // 2  # the third call's body is over the bound
    users = [{"role": "user", "content": f"part {i}: " + "x" * chunk} for i in range(3)]
    tasks = tmp_path / "t.jsonl"
    tasks.write_bytes(orjson.dumps({"id": "long", "messages": users}) + b"\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    config = RunConfig.model_validate({
        "tasks": str(tasks), "harness": "rollout_harnesses:released_history",
        "endpoint": sim.base_url, "model": "sim-model", "store": url,
        "rewards": ["rollout_harnesses:whole_history"], "workers": 0,
    })  # fmt: skip
    result = await rolltap.evaluate(config)
    assert result.summary["statuses"] == {"completed": 1}
    assert [r.reward for r in result.results] == [1.0]  # every message, read back
    async with await Store.open(url) as store:
        (session,) = await store.list_sessions(run=result.run_id)
        stored = await store.events(session.id)
    requests = [e.payload for e in stored if e.kind == "model_request"]
    assert [len(p["messages"]) for p in requests] == [1, 2, 2]  # each message stored once
    assert all("released" not in p for p in requests)
