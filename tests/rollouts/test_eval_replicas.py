"""`rolltap eval --endpoint URL1 --endpoint URL2 --endpoint URL3` against three simulators:
each rollout's calls all on one replica, the rollouts spread over the three."""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import orjson

from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store

CLI = "from rolltap.cli.main import main; main()"


async def test_eval_pins_each_rollout_to_one_of_three_replicas(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "prompt": f"what is {i}*7?", "info": {"regex": "."}} for i in range(9)]
    tasks.write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    url = f"sqlite:///{tmp_path}/runs.db"
    async with AsyncExitStack() as stack:
        # each call takes a while, so the nine rollouts (at most 9 at once) overlap
        config = SimConfig(seed=3, ttft_ms=200)
        sims = [await stack.enter_async_context(Simulator(config)) for _ in range(3)]
        flags = [arg for sim in sims for arg in ("--endpoint", sim.base_url)]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLI, "eval", str(tasks), "--harness", "tool-agent", *flags,
            "--model", "sim-model", "--reward", "regex", "-c", "9", "--store", url, "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert orjson.loads(out)["statuses"] == {"completed": 9}
        async with await Store.open(url) as store:
            sessions = await store.list_sessions()
            on: dict[str, set[str]] = {}
            for session in sessions:
                events = await store.events(session.id)
                requests = [e.payload for e in events if e.kind == "model_request"]
                assert len(requests) == 2  # the tool call, then the answer
                on[session.id] = {r["replica"] for r in requests}
    by_url = {sim.base_url: sim for sim in sims}
    served: dict[str, int] = {}
    for replicas in on.values():
        assert len(replicas) == 1  # every call of a rollout on one replica
        served[next(iter(replicas))] = served.get(next(iter(replicas)), 0) + 1
    assert sorted(served.values()) == [3, 3, 3]
    for replica, sim in by_url.items():
        rollouts = sim.stats.requests_by_session
        assert sum(rollouts.values()) == 2 * served[replica]
        assert all(count == 2 for count in rollouts.values())
