"""``rolltap sim`` (registered on a throwaway typer app)."""

from __future__ import annotations

import asyncio

import aiohttp

from rolltap.cli.sim_cmd import run_sim
from rolltap.sim import SimConfig, Simulator
from sim.simkit import sim_cli


def test_help_documents_the_fault_grammar() -> None:
    result = sim_cli("--help")
    assert result.exit_code == 0, result.output
    for text in (
        "KIND[=ARG][@PROB]",
        "status=429@0.1",
        "stall=",
        "stall-mid=",
        "drop=",
        "malformed",
        "reset",
    ):
        assert text in result.output
    for option in ("--host", "--port", "--seed", "--ttft-ms", "--tokens-per-s", "--fault"):
        assert option in result.output


def test_bad_fault_exits_non_zero_with_a_clear_message() -> None:
    result = sim_cli("--fault", "status=200")
    assert result.exit_code != 0
    assert "invalid fault spec 'status=200'" in result.output
    assert "400-599" in result.output


async def test_run_sim_serves_until_stopped() -> None:
    stop = asyncio.Event()
    ready: asyncio.Queue[Simulator] = asyncio.Queue()
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(
            run_sim(SimConfig(), "127.0.0.1", 0, on_ready=ready.put_nowait, stop=stop)
        )
        sim = await ready.get()
        async with aiohttp.ClientSession() as http, http.get(sim.url + "/health") as resp:
            assert resp.status == 200
            assert await resp.json() == {"status": "ok"}
        stop.set()
