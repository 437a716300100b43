"""SIGTERM stops ``rolltap eval`` and ``rolltap gateway`` like Ctrl-C: open rollouts are
marked in the store (never left ``running``), and the exit code says how it ended."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import aiohttp
import orjson
import pytest

from clikit import argv, cli_env
from rolltap.sim import Simulator
from rolltap.store import Store
from serve.servekit import read_until

TOKEN = "signal-test-token"


def _gated_tasks(path: Path, count: int) -> str:
    """Tasks whose one model call the simulator holds at the gate ``never``."""
    lines = [{"id": f"t{i}", "prompt": "hi", "info": {"gate": "never"}} for i in range(count)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


async def _sessions(url: str) -> dict[str, str]:
    async with await Store.open(url) as store:
        return {s.id: s.status for s in await store.list_sessions()}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
async def test_a_signal_stops_eval_and_marks_its_rollouts(
    sim: Simulator, tmp_path: Path, signum: int, code: int
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = await asyncio.create_subprocess_exec(
        *argv("eval", _gated_tasks(tmp_path / "tasks.jsonl", 3), "-c", "2",
              "--harness", "serve.serve_harnesses:gated", "--endpoint", sim.base_url,
              "--store", url),
        env=cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await sim.wait_for(lambda stats: stats.in_flight == 2, timeout=30)
        before = await _sessions(url)
        assert len(before) == 2 and set(before.values()) <= {"pending", "running"}
        proc.send_signal(signum)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == code, (out + err).decode()
    assert "Traceback" not in (out + err).decode()
    assert "eval --resume" in err.decode()
    assert sorted((await _sessions(url)).values()) == ["cancelled", "cancelled"]


async def _held_call(http: aiohttp.ClientSession, rollout: dict[str, str]) -> int:
    """A call the simulator holds; its status once the gateway ends it (-1: dropped)."""
    try:
        async with http.post(
            rollout["base_url"] + "/chat/completions",
            json={"model": "x", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {rollout['api_key']}", "x-sim-gate": "never"},
        ) as resp:
            await resp.read()
            return resp.status
    except aiohttp.ClientError:
        return -1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_the_gateway_and_marks_its_sessions(
    sim: Simulator, tmp_path: Path, signum: int
) -> None:
    url = f"sqlite:///{tmp_path / 'gw.db'}"
    proc = await asyncio.create_subprocess_exec(
        *argv("gateway", "--endpoint", sim.base_url, "--model", "sim-model", "--store", url),
        env=cli_env(ROLLTAP_ADMIN_TOKEN=TOKEN),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        match = re.search(r"admin API: (http://\S+)", await read_until(proc.stdout, "admin API"))
        assert match
        async with aiohttp.ClientSession() as http:
            rollouts = []
            for _ in range(2):
                async with http.post(match.group(1) + "/rollouts", headers=headers) as resp:
                    rollouts.append(await resp.json())
            async with asyncio.TaskGroup() as group:
                held = group.create_task(_held_call(http, rollouts[0]))
                await sim.wait_for(lambda stats: stats.in_flight == 1)
                proc.send_signal(signum)
            assert held.result() != 200  # the gateway closed the call it held
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, out.decode()
    assert "Traceback" not in out.decode()
    assert await _sessions(url) == {r["id"]: "cancelled" for r in rollouts}
