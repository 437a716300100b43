"""A :class:`~rolltap.rollouts.Runner` built by hand (as serve's jobs build theirs) on the
simulator, over any session store."""

from __future__ import annotations

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.rollouts import RewardSpec, RolloutResult, Runner, Scorer, Task, WorkItem
from rolltap.rollouts.builtin import chat_harness
from rolltap.rollouts.recorder import SessionStore, StoreRecorder
from rolltap.sim import Simulator


async def run_placed(
    sim: Simulator, store: SessionStore, run_id: str, n: int, *,
    node_id: str | None = None, worker_id: str | None = None,
) -> list[RolloutResult]:  # fmt: skip
    """``n`` one-turn rollouts of a runner placed on ``node_id`` as ``worker_id``."""
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    async with (
        StoreRecorder(store, final_commit=False) as recorder,
        Gateway(endpoint, GatewaySettings(), observers=[recorder]) as gateway,
    ):
        runner = Runner(
            gateway=gateway, store=store, observer=recorder, run_id=run_id,
            harness=chat_harness, scorer=Scorer([RewardSpec("contains")]), model="sim-model",
            c=4, node_id=node_id, worker_id=worker_id,
        )  # fmt: skip
        items = [WorkItem(Task(id=f"t{i}", prompt=f"say {i}"), 0) for i in range(n)]
        return await runner.run(items)
