"""Issue 27's wave: 50 tool-loop rollouts through ``rolltap serve`` while a trainer updates
the policy three times as a trainer does (drain the service, update the engine's weights,
set the version, resume), and every answer says the version it was generated under — the
engine's report and the service's version agreeing on every call."""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rolltap.config import EndpointConfig
from rolltap.serve import RolloutSpec, ServeClient, ServeResult
from rolltap.serve.client import BatchStream
from rolltap.sim import SimConfig, SimStats, Simulator
from rolltap.store import Store
from serve.servekit import TOKEN, ServiceFactory

ROLLOUTS = 50
#: each rollout: five calculator calls, then its answer (six model calls)
TOOL_TURNS = 5
SCRIPT = {
    "default": [
        *[{"tool_call": {"name": "calculator", "arguments": {"expression": f"{i}+1"}}}
          for i in range(TOOL_TURNS)],
        {"text": "done"},
    ]
}  # fmt: skip
CALLS = ROLLOUTS * (TOOL_TURNS + 1)
#: a bump once this many answers were given (all well before the last)
BUMP_AFTER = (CALLS // 6, CALLS // 3, CALLS // 2)


@pytest.fixture
async def tool_sim() -> AsyncIterator[Simulator]:
    # a few ms per answer: the wave lasts past the bumps on any machine
    config = SimConfig(seed=7, script=SCRIPT, ttft_ms=5.0, policy_version="v0")
    async with Simulator(config) as simulator:
        yield simulator


def _answered(count: int) -> Callable[[SimStats], bool]:
    return lambda stats: stats.completed >= count


async def _update_engine(client: ServeClient, engine: Simulator, version: str) -> None:
    """The engine's weights updated (SGLang's route), as the trainer does while drained."""
    body = {"new_version": version, "abort_all_requests": False}
    async with client.http.post(engine.url + "/update_weight_version", json=body) as resp:
        assert resp.status == 200, await resp.text()


async def _collect(batch: BatchStream) -> list[ServeResult]:
    return [result async for result in batch]


@pytest.mark.timeout(240)
async def test_every_answer_carries_the_version_it_was_generated_under(
    start_service: ServiceFactory, tool_sim: Simulator, tmp_path: Path
) -> None:
    endpoint = EndpointConfig(base_url=tool_sim.base_url, model="sim-model")
    service = await start_service(endpoints=[endpoint], max_inflight=ROLLOUTS)
    specs = [
        RolloutSpec(task={"id": f"t{i}", "prompt": "what is 1+1?", "info": {"regex": "."}},
                    harness="tool-agent", rewards=["regex"])
        for i in range(ROLLOUTS)
    ]  # fmt: skip
    #: when each bump's drain had answered: every answer before it was generated under
    #: the version before, every answer after under the new one (none in between)
    drained_at: list[float] = []
    async with ServeClient(service.url, TOKEN) as client:
        await client.set_policy_version("v0")
        async with client.batch(specs) as batch, asyncio.TaskGroup() as group:
            collecting = group.create_task(_collect(batch))
            for number, after in enumerate(BUMP_AFTER, start=1):
                await tool_sim.wait_for(_answered(after))
                await client.pause("drain")  # every worker: nothing in flight
                drained_at.append(time.time())
                await _update_engine(client, tool_sim, f"v{number}")
                await client.set_policy_version(f"v{number}")
                await client.resume()
            results = await collecting
    assert len(results) == ROLLOUTS
    assert {(r.status, r.calls) for r in results} == {("completed", TOOL_TURNS + 1)}
    assert {r.worker for r in results} == {0, 1}
    assert tool_sim.stats.completed == CALLS  # nothing lost, nothing sent twice
    async with await Store.open(f"sqlite:///{tmp_path / 'serve.db'}") as store:
        events = [event for result in results for event in await store.events(result.id)]
    answers = [event for event in events if event.kind == "model_response"]
    # the engine reported each answer's version, and the service's agreed every time
    assert [e.payload for e in events if e.payload.get("reason") == "policy_version_mismatch"] == []
    assert len(answers) == CALLS
    expected = [f"v{bisect.bisect(drained_at, event.ts)}" for event in answers]
    assert [event.payload["policy_version"] for event in answers] == expected
    reported = [event.payload["body"]["metadata"]["weight_version"] for event in answers]
    assert reported == expected  # what the engine said it generated with
    # the bumps landed while the rollouts ran: each version answered some calls
    assert sorted(Counter(expected)) == ["v0", "v1", "v2", "v3"]
    assert sum(len(r.policy_versions) > 1 for r in results) > 0  # rollouts spanned bumps
