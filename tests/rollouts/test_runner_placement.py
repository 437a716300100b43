"""The runner says where it runs: every session it creates carries its node and worker id."""

from __future__ import annotations

from pathlib import Path

from rollouts.runnerkit import run_placed
from rolltap.sim import Simulator
from rolltap.store import Store


async def test_every_session_a_runner_creates_names_its_node_and_worker(
    sim: Simulator, tmp_path: Path
) -> None:
    async with await Store.open(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        placed, plain = await store.create_run("placed"), await store.create_run("plain")
        ran = await run_placed(sim, store, placed.id, 6, node_id="node-b", worker_id="w1")
        await run_placed(sim, store, plain.id, 2)
        sessions = await store.list_sessions(placed.id)
        unplaced = await store.list_sessions(plain.id)
    assert sorted(r.session_id or "" for r in ran) == sorted(s.id for s in sessions)
    assert {(s.status, s.node_id, s.worker_id) for s in sessions} == {("completed", "node-b", "w1")}
    assert len(sessions) == 6
    assert [(s.status, s.node_id, s.worker_id) for s in unplaced] == [("completed", None, None)] * 2
