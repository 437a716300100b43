"""``rolltap serve``'s ``/metrics``: the workers' token drift, summed. Two workers relay
with server-side token capture to a simulator that re-tokenizes its history, so every
turn after a rollout's first drifts; the service's ``rolltap_token_drift_total`` is the
sum of what the workers' heartbeats report."""

from __future__ import annotations

from typing import Any

import aiohttp

from rolltap.config import EndpointConfig
from rolltap.serve import RolloutSpec, ServeClient
from rolltap.serve.supervisor.worker_slots import WorkerSlots
from rolltap.sim import SimConfig, Simulator
from serve.servekit import TOKEN, ServiceFactory


def _drifts(fleet: WorkerSlots) -> list[int]:
    return [(h.stats.get("totals") or {}).get("token_drift", 0)
            for h in fleet.slots if h is not None]  # fmt: skip


async def test_metrics_sum_the_workers_token_drift(
    start_service: ServiceFactory, http: aiohttp.ClientSession
) -> None:
    async with Simulator(SimConfig(seed=7, retokenize_history=True)) as sim:
        endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", capture_tokens=True)
        service = await start_service(workers=2, endpoints=[endpoint])
        specs = [RolloutSpec(task={"id": f"t{i}", "prompt": "hi"},
                             harness="serve.serve_harnesses:three_calls")
                 for i in range(4)]  # fmt: skip
        async with ServeClient(service.url, TOKEN) as client, client.batch(specs) as batch:
            statuses = [r.status async for r in batch]
        fleet = service.supervisor.worker_slots
        # three calls each: the second and third drift (4 rollouts, 8 turns)
        await fleet.wait_until(lambda f: sum(_drifts(f)) == 8)
        async with http.get(
            service.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as resp:
            text = await resp.text()
    assert statuses == ["completed"] * 4
    lines: list[Any] = [m for m in text.splitlines() if m.startswith("rolltap_token_drift_total")]
    assert lines == ["rolltap_token_drift_total 8.0"]
