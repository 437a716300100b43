"""``rolltap eval --workers N`` through a database outage: the progress line is told.

Each worker writes PostgreSQL itself; the driver's ``on_store`` hook (the progress
line's "store unavailable for N s" note) hears of the outage from the workers' writers
and of its end, and every rollout is still stored once. The server is private to the
test (tests/store/privatedb.py): the machine's shared one is never stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import orjson
import pytest

import rolltap
from rolltap.rollouts import Hooks, RolloutResult
from rolltap.sim import Simulator
from rolltap.store import Store, WriterStats, upgrade
from serve.test_eval_workers import run_config, stored
from store.privatedb import PrivateServer, private_postgres

__all__ = ["private_postgres"]  # the fixture used below


@pytest.mark.timeout(240)
async def test_the_progress_line_hears_of_an_outage_and_every_rollout_is_stored_once(
    private_postgres: PrivateServer, sim: Simulator, tmp_path: Path
) -> None:
    url = private_postgres.url
    await upgrade(url)
    tasks = tmp_path / "t.jsonl"
    # the first 6 (3 on each worker) wait at "g", the 6 admitted after the outage at "g2"
    rows = [{"id": f"t{i}", "prompt": f"say t{i}", "info": {"gate": "g" if i < 6 else "g2"}}
            for i in range(12)]  # fmt: skip
    tasks.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    config = run_config(sim, str(tasks), url, c=6, workers=2)
    first, second = sim.gate("g"), sim.gate("g2")
    landed, reports = list[RolloutResult](), list[WriterStats]()
    down, back = asyncio.Event(), asyncio.Event()

    def on_store(stats: WriterStats) -> None:
        reports.append(stats)
        if stats.unavailable_s is not None and stats.pending_commits > 0:
            down.set()
        elif down.is_set() and stats.unavailable_s is None:
            back.set()

    async def outage() -> None:
        await sim.wait_for(lambda _: first.held == 6, timeout=60)
        await asyncio.to_thread(private_postgres.stop)
        first.open()  # their answers come while the server is away: the writes are held
        try:
            with contextlib.suppress(TimeoutError):  # not heard: the asserts below say so
                await asyncio.wait_for(down.wait(), 30)
        finally:  # back whatever was heard, so that the run can end
            await asyncio.to_thread(private_postgres.start)
        await sim.wait_for(lambda _: second.held == 6, timeout=60)  # admitted again
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(back.wait(), 30)  # heard while the run still goes on
        second.open()

    async with asyncio.TaskGroup() as group:
        group.create_task(outage())
        result = await rolltap.evaluate(
            config, hooks=Hooks(on_result=landed.append, on_store=on_store)
        )
    assert result.summary["statuses"] == {"completed": 12} and len(landed) == 12
    expected = sorted((f"t{i}", 0, "completed") for i in range(12))
    assert sorted(await stored(url, result.run_id)) == expected
    assert down.is_set() and back.is_set()  # the outage, and its end, were reported
    notes = [note for s in reports if (note := s.describe()) is not None]
    assert notes and all(n.startswith("store unavailable for ") for n in notes)
    async with await Store.open(url) as store:
        for session in await store.list_sessions(run=result.run_id):
            events = await store.events(session.id)
            assert [e.seq for e in events] == list(range(session.n_events)), session.id
