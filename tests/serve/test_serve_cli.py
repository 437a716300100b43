"""``rolltap serve`` as a process: SIGTERM drains, a second SIGTERM cancels, exit 0."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from clikit import cli_env
from local.localkit import wait_gone
from rolltap.errors import ServiceDrainingError
from rolltap.serve import ServeClient
from rolltap.sim import Simulator
from rolltap.store import Store
from serve.servekit import TOKEN, chat_spec, gated_spec, read_until

HERE = Path(__file__).parent
CLI = "from rolltap.cli.main import main; main()"
# Each test starts a whole `rolltap serve` (a supervisor and its worker processes), the
# kill -9 one two of them: 10 s on a quiet machine, minutes beside a compile (process
# start and exit grow fastest with load). So no wait below has a deadline of its own,
# each waits for what it means; this budget is the one bound.
pytestmark = pytest.mark.timeout(300)
#: the bound a wait on the simulator must name: the test's own budget
BUDGET_S = 300.0


async def _serve(sim: Simulator, store: str, *flags: str) -> asyncio.subprocess.Process:
    env = cli_env(ROLLTAP_SERVE_TOKEN=TOKEN)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "serve", "--endpoint", sim.base_url, "--model", "sim-model",
        "--workers", "1", "--port", "0", "--store", store, "--stats-interval", "0.2", *flags,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip


async def test_sigterm_drains_then_a_second_cancels(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    proc = await _serve(sim, url)
    assert proc.stdout is not None
    try:
        line = await read_until(proc.stdout, "rolltap serve: http")
        match = re.search(r"(http://\S+)", line)
        assert match, line
        async with ServeClient(match.group(1), TOKEN) as client:
            specs = [gated_spec("finishes", "open-later"), gated_spec("stuck", "never")]
            async with client.batch(specs) as batch:
                await sim.wait_for(lambda stats: stats.in_flight == 2, timeout=BUDGET_S)
                proc.send_signal(signal.SIGTERM)
                await read_until(proc.stdout, "draining")
                with pytest.raises(ServiceDrainingError):
                    await client.submit(chat_spec("late"))
                sim.gate("open-later").open()
                stream = aiter(batch)
                first = await anext(stream)
                proc.send_signal(signal.SIGTERM)
                rest = [r async for r in stream]
        out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, out.decode()
    assert (first.task_id, first.status) == ("finishes", "completed")
    assert [(r.task_id, r.status) for r in rest] == [("stuck", "cancelled")]
    assert "drained and stopped" in out.decode()
    assert TOKEN not in out.decode()
    async with await Store.open(url) as store:
        sessions = {s.id: s.status for s in await store.list_sessions(run=batch.run_id)}
    assert sessions == {first.id: "completed", rest[0].id: "cancelled"}


async def test_a_drain_that_times_out_exits_1(sim: Simulator, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    proc = await _serve(sim, url, "--drain-timeout", "0.1")
    assert proc.stdout is not None
    try:
        match = re.search(r"(http://\S+)", await read_until(proc.stdout, "rolltap serve: http"))
        assert match
        client = ServeClient(match.group(1), TOKEN)
        async with client, client.batch([gated_spec("stuck", "never")]) as batch:
            await sim.wait_for(lambda stats: stats.in_flight == 1, timeout=BUDGET_S)
            proc.send_signal(signal.SIGTERM)
            results = [r async for r in batch]
        out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 1, out.decode()
    assert [r.status for r in results] == ["cancelled"]
    assert "error [drain_timeout]" in out.decode()
    assert "Traceback" not in out.decode()


async def _serve_url(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    match = re.search(r"(http://\S+)", await read_until(proc.stdout, "rolltap serve: http"))
    assert match
    return match.group(1)


async def _read_as(url: str, run_id: str, status: str, count: int) -> list[str]:
    """Read the store (as `sessions list` does) until ``count`` sessions read ``status``.

    Until, not for a while: a dead owner's sessions read ``interrupted`` once its lease
    expires, which a store tells no one; the read that sees it ends the wait.
    """
    while True:
        async with await Store.open(url) as store:
            found = [s.id for s in await store.list_sessions(run=run_id) if s.status == status]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.2)


async def test_kill_9_of_the_supervisor_then_callers_resubmit(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    config = tmp_path / "serve.toml"
    config.write_text("[serve]\nlease_ttl_s = 1.0\n")
    proc = await _serve(sim, url, "--config", str(config), "--workers", "2")
    try:
        async with ServeClient(await _serve_url(proc), TOKEN) as client:
            held = [gated_spec(f"t{i}", "crash") for i in range(3)]
            async with client.batch(held) as batch:
                await sim.wait_for(lambda stats: stats.in_flight == 3, timeout=BUDGET_S)
                workers = [w["pid"] for w in (await client.status())["workers"]]
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # the workers and their rollouts die with the supervisor (the watchdog)
    assert all([await asyncio.to_thread(wait_gone, pid, BUDGET_S) for pid in workers]), workers
    interrupted = await _read_as(url, batch.run_id, "interrupted", 3)
    assert sorted(interrupted) == sorted(batch.rollouts)

    # a new service; the caller resubmits the interrupted rollouts into the same run
    again = await _serve(sim, url, "--config", str(config))
    try:
        async with ServeClient(await _serve_url(again), TOKEN) as client:
            specs = [chat_spec(f"t{i}") for i in range(3)]
            results = [r async for r in client.submit_batch(specs, run_id=batch.run_id)]
        again.send_signal(signal.SIGTERM)
        await again.communicate()
    finally:
        if again.returncode is None:
            again.kill()
            await again.wait()
    assert again.returncode == 0
    assert sorted((r.task_id, r.status) for r in results) == [
        (f"t{i}", "completed") for i in range(3)
    ]
    async with await Store.open(url) as store:
        stored = {s.id: s.status for s in await store.list_sessions(run=batch.run_id)}
        run = await store.get_run(batch.run_id)
    # the takeover stored the lost ones interrupted; nothing was stored twice
    assert stored == {
        **{rid: "interrupted" for rid in batch.rollouts},
        **{r.id: "completed" for r in results},
    }
    assert (run.n_sessions, run.n_interrupted) == (6, 3)
