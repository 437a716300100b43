"""``kill -9`` of a ``rolltap eval`` mid-run: once its lease expires its open rollouts read
``interrupted``; ``rolltap eval --resume`` takes the run over and reruns exactly those."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import orjson

from clikit import argv, arolltap, cli_env
from rolltap.sim import Simulator
from rolltap.store import SessionInfo, Store

HELD, FREE = 4, 2


def _tasks(path: Path) -> str:
    """FREE tasks that finish, HELD ones whose model call the simulator holds at ``crash``."""
    lines: list[dict[str, object]] = [{"id": f"free{i}", "prompt": "hi"} for i in range(FREE)]
    lines += [{"id": f"held{i}", "prompt": "hi", "info": {"gate": "crash"}} for i in range(HELD)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


async def _sessions(url: str) -> list[SessionInfo]:
    async with await Store.open(url) as store:
        return await store.list_sessions()


def _status(session: SessionInfo) -> str:
    """``open`` for a rollout not finished (``pending`` until its first commit)."""
    return "open" if session.status in ("pending", "running") else session.status


async def _until(url: str, want: dict[str, int]) -> list[SessionInfo]:
    """Read the store until its sessions have the status counts ``want`` (bounded)."""
    async with asyncio.timeout(60):
        while True:
            found = await _sessions(url)
            counts = {s: sum(_status(x) == s for x in found) for s in want}
            if counts == want and len(found) == sum(want.values()):
                return found
            await asyncio.sleep(0.05)


async def _eval(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv("eval", *args), env=cli_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_kill_9_of_eval_then_resume_reruns_exactly_the_interrupted(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    config = tmp_path / "run.toml"
    config.write_text("lease_ttl_s = 1.0\n")
    proc = await _eval(
        _tasks(tmp_path / "tasks.jsonl"), "-c", str(HELD + FREE), "--config", str(config),
        "--harness", "serve.serve_harnesses:gated", "--endpoint", sim.base_url, "--store", url,
    )  # fmt: skip
    try:
        await sim.wait_for(lambda stats: stats.in_flight == HELD, timeout=60)
        before = await _until(url, {"completed": FREE, "open": HELD})
        os.kill(proc.pid, signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    held = {s.id for s in before if _status(s) == "open"}
    kept = {s.id for s in before if s.status == "completed"}
    # the row still says pending/running; once the dead owner's lease expires it reads interrupted
    after = await _until(url, {"completed": FREE, "interrupted": HELD})
    assert {s.id for s in after if s.status == "interrupted"} == held
    run_id = after[0].run_id
    async with await Store.open(url) as store:
        run = await store.get_run(run_id)
    assert (run.n_interrupted, run.n_finished, run.n_failed) == (HELD, HELD + FREE, HELD)
    listed = await arolltap("runs", "list", "--store", url, env={"COLUMNS": "200"})
    header, _, row = listed.stdout.splitlines()[:3]
    at = header.index("interrupted")  # the column is as wide as its header
    assert row[at : at + len("interrupted")].strip() == str(HELD), listed.output

    sim.gate("crash").open()
    resumed = await _eval("--resume", run_id, "--store", url)
    out, err = await asyncio.wait_for(resumed.communicate(), 120)
    assert resumed.returncode == 0, (out + err).decode()

    final = await _sessions(url)
    assert len(final) == HELD + FREE and {s.status for s in final} == {"completed"}
    keys = sorted((s.task["task_id"], s.task["sample"]) for s in final)
    assert len(set(keys)) == len(keys) == HELD + FREE  # every rollout stored once
    ids = {s.id for s in final}
    assert kept <= ids and not held & ids  # exactly the interrupted ones were rerun
    async with await Store.open(url) as store:
        run = await store.get_run(run_id)
    assert (run.n_sessions, run.n_finished, run.n_failed, run.n_interrupted) == (6, 6, 0, 0)
