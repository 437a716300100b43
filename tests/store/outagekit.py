"""An eval against the simulator with a database outage injected on its progress."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rolltap.config import EndpointConfig
from rolltap.errors import RolltapError
from rolltap.rollouts import Hooks, RolloutResult, Runner, RunResult, Task
from rolltap.rollouts.api import Stoppable
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store, WriterStats
from runkit import evaluate
from store.privatedb import PrivateServer

#: what every rollout of the chat harness on three user turns stores, in order
EXPECTED_KINDS = ["model_request", "model_response"] * 3 + ["reward", "status"]


def three_turn_tasks(count: int) -> list[Task]:
    users = [{"role": "user", "content": f"turn {i}"} for i in range(3)]
    return [Task(id=f"t{i}", messages=users, answer="x") for i in range(count)]


@dataclass
class Outage:
    """Stop ``server`` once ``after`` results are in; start it again after ``down_s``
    (``None``: leave it down). Records what the run looked like meanwhile."""

    server: PrivateServer | None
    after: int
    down_s: float | None
    results: list[RolloutResult] = field(default_factory=list)
    stats: list[WriterStats] = field(default_factory=list)
    runner: Runner | None = None
    admitted_at_stop: int = -1
    admitted_at_start: int = -1
    #: rollouts admitted when the writer was first seen reporting the outage
    admitted_seen_down: int = -1
    results_at_start: int = -1
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    async def inject(self) -> None:
        assert self.server is not None
        await asyncio.to_thread(self.server.stop)
        assert self.runner is not None
        self.admitted_at_stop = self.runner.admitted
        self.stopped.set()
        if self.down_s is None:
            return
        await asyncio.sleep(self.down_s)  # the outage itself: a deliberate duration
        self.admitted_at_start = self.runner.admitted
        self.results_at_start = len(self.results)
        await asyncio.to_thread(self.server.start)

    def on_store(self, stats: WriterStats) -> None:
        self.stats.append(stats)
        seen = self.stopped.is_set() and stats.unavailable_s is not None
        if seen and self.admitted_seen_down < 0 and self.runner is not None:
            self.admitted_seen_down = self.runner.admitted

    def unavailable_notes(self) -> list[str]:
        return [note for s in self.stats if (note := s.describe()) is not None]


async def run_with_outage(
    outage: Outage, url: str, n: int, *, c: int = 16, timeout_s: float = 300.0, ttft_ms: float = 5
) -> RunResult | RolltapError:
    """``n`` three-turn rollouts through the simulator into ``url``, the outage injected."""
    async with Simulator(SimConfig(seed=11, ttft_ms=ttft_ms)) as sim, asyncio.TaskGroup() as tg:
        endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")

        def on_result(result: RolloutResult) -> None:
            outage.results.append(result)
            if len(outage.results) == outage.after:
                tg.create_task(outage.inject())

        def on_runner(runner: Stoppable) -> None:
            assert isinstance(runner, Runner)  # an in-process run
            outage.runner = runner

        hooks = Hooks(on_result=on_result, on_runner=on_runner, on_store=outage.on_store)
        try:
            return await evaluate(
                three_turn_tasks(n), harness="chat", endpoint=endpoint, c=c, store=url,
                rewards=["contains"], hooks=hooks, store_unavailable_timeout_s=timeout_s,
            )  # fmt: skip
        except RolltapError as err:
            return err


async def assert_every_rollout_once(url: str, run_id: str, n: int) -> None:
    """The run holds ``n`` sessions, one per task, each with all its events exactly once."""
    async with await Store.open(url) as store:
        sessions = await store.list_sessions(run=run_id)
        assert sorted(s.task["task_id"] for s in sessions) == sorted(f"t{i}" for i in range(n))
        total = 0
        for session in sessions:
            events = await store.events(session.id)
            assert [e.seq for e in events] == list(range(len(events))), session.id
            assert [e.kind for e in events] == EXPECTED_KINDS, session.id
            assert (session.status, session.n_events) == ("completed", len(EXPECTED_KINDS))
            total += len(events)
        info = await store.get_run(run_id)
        assert (info.n_sessions, info.n_finished) == (n, n)
        assert total == n * len(EXPECTED_KINDS)
