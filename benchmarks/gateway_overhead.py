"""Gateway overhead: direct to the simulator vs through the gateway, in the same run.

    python benchmarks/gateway_overhead.py [--turns 100] [--rollouts 64] [--samples 2000]
                                          [--rounds 10] [--quick]

(a) added p50/p99 latency per non-streaming call at concurrency 1;
(b) throughput ratio gateway/direct at 64 concurrent rollouts x 100 turns;
(c) added time to first chunk for streams at concurrency 1;
(d) for every harness x upstream dialect pair (one gateway process per upstream
    dialect): added p50 per non-streaming call, added stream time per upstream chunk and
    the gateway's CPU per call, against the simulator called directly in the harness's
    dialect (see _dialect_load.py).
Each process's CPU seconds are reported. The load generator is raw aiohttp (the OpenAI SDK
itself caps near 200 req/s). --quick: fewer samples, done in under a minute. Not part of CI.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import psutil
from _dialect_load import DIALECTS, STREAM_TOKENS, Matrix, run_matrix
from _dialect_table import print_matrix
from _procs import cpu_seconds, free_port, rolltap_process

BODY = {"model": "m", "messages": [{"role": "user", "content": "benchmark me"}], "max_tokens": 16}
STREAM_BODY = {**BODY, "stream": True}


@dataclass
class Target:
    name: str
    url: str  # .../v1
    key: str


async def one_call(http: aiohttp.ClientSession, t: Target, body: bytes) -> None:
    async with http.post(
        t.url + "/chat/completions",
        data=body,
        headers={"Authorization": f"Bearer {t.key}", "Content-Type": "application/json"},
    ) as resp:
        await resp.read()
        assert resp.status == 200, resp.status


async def first_chunk(http: aiohttp.ClientSession, t: Target, body: bytes) -> float:
    start = time.perf_counter()
    async with http.post(
        t.url + "/chat/completions",
        data=body,
        headers={"Authorization": f"Bearer {t.key}", "Content-Type": "application/json"},
    ) as resp:
        await resp.content.readany()
        ttfc = time.perf_counter() - start
        await resp.read()
    return ttfc


async def latencies(http: aiohttp.ClientSession, t: Target, n: int) -> list[float]:
    body = orjson.dumps(BODY)
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await one_call(http, t, body)
        out.append(time.perf_counter() - start)
    return out


async def throughput(
    http: aiohttp.ClientSession, targets: list[Target], turns: int
) -> tuple[float, int]:
    body = orjson.dumps(BODY)

    async def rollout(t: Target) -> None:
        for _ in range(turns):
            await one_call(http, t, body)

    start = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for t in targets:
            tg.create_task(rollout(t))
    elapsed = time.perf_counter() - start
    calls = len(targets) * turns
    return calls / elapsed, calls


async def register(http: aiohttp.ClientSession, admin: str, n: int) -> list[Target]:
    out = []
    for _ in range(n):
        async with http.post(
            admin + "/rollouts", headers={"Authorization": "Bearer bench"}
        ) as resp:
            data: dict[str, Any] = await resp.json()
        out.append(Target("gateway", data["openai_base_url"], data["api_key"]))
    return out


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000.0


async def measure(args: argparse.Namespace, sim_url: str, sim: psutil.Process,
                  gateways: dict[str, tuple[str, psutil.Process]]) -> None:  # fmt: skip
    gw_admin, gw = gateways["chat"]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        direct = Target("direct", sim_url + "/v1", "k")
        (gw_one,) = await register(http, gw_admin, 1)
        many = await register(http, gw_admin, args.rollouts)
        await latencies(http, direct, 200)  # warm both paths
        await latencies(http, gw_one, 200)
        lat_d = await latencies(http, direct, args.samples)
        lat_g = await latencies(http, gw_one, args.samples)
        sb = orjson.dumps(STREAM_BODY)
        ttfc_d = [await first_chunk(http, direct, sb) for _ in range(args.samples // 2)]
        ttfc_g = [await first_chunk(http, gw_one, sb) for _ in range(args.samples // 2)]
        cpu0 = {"sim": cpu_seconds(sim), "gateway": cpu_seconds(gw)}
        direct_many = [direct] * args.rollouts
        rate_d, calls = await throughput(http, direct_many, args.turns)
        cpu1 = {"sim": cpu_seconds(sim), "gateway": cpu_seconds(gw)}
        rate_g, _ = await throughput(http, many, args.turns)
        cpu2 = {"sim": cpu_seconds(sim), "gateway": cpu_seconds(gw)}
        report(lat_d, lat_g, ttfc_d, ttfc_g, rate_d, rate_g, calls, cpu0, cpu1, cpu2)
        if args.rounds > 0:
            print_matrix(await run_matrix(http, sim_url, gateways, args.matrix))


def report(lat_d: list[float], lat_g: list[float], ttfc_d: list[float], ttfc_g: list[float],
           rate_d: float, rate_g: float, calls: int, cpu0: dict[str, float],
           cpu1: dict[str, float], cpu2: dict[str, float]) -> None:  # fmt: skip
    rows = [
        ("(a) added p50 latency, c=1", f"{pct(lat_g, 50) - pct(lat_d, 50):.3f} ms", "<= 0.5 ms"),
        ("(a) added p99 latency, c=1", f"{pct(lat_g, 99) - pct(lat_d, 99):.3f} ms", ""),
        ("(b) throughput gateway/direct", f"{rate_g / rate_d:.2f}", ">= 0.35"),
        ("(c) added p50 time to first chunk", f"{pct(ttfc_g, 50) - pct(ttfc_d, 50):.3f} ms",
         "<= 1 ms"),
    ]  # fmt: skip
    print(f"\n{'measure':<36} {'value':>12}  goal")
    for name, value, goal in rows:
        print(f"{name:<36} {value:>12}  {goal}")
    print(f"\ndirect p50 {pct(lat_d, 50):.3f} ms, gateway p50 {pct(lat_g, 50):.3f} ms")
    print(f"direct {rate_d:.0f} calls/s, gateway {rate_g:.0f} calls/s ({calls} calls each)")
    d_sim = cpu1["sim"] - cpu0["sim"]
    g_sim, g_gw = cpu2["sim"] - cpu1["sim"], cpu2["gateway"] - cpu1["gateway"]
    print(f"CPU s during (b): direct run: sim {d_sim:.2f}; "
          f"gateway run: sim {g_sim:.2f}, gateway {g_gw:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10, help="(d) rounds; 0 skips (d)")
    parser.add_argument("--quick", action="store_true", help="a rough run in under a minute")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.turns, args.rounds = 400, 10, min(args.rounds, 4)
    block, stream_block = (80, 16) if args.quick else (200, 50)
    args.matrix = Matrix(args.rounds, block, stream_block)
    sim_port = free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    # streams in (d) are STREAM_TOKENS long; (a)-(c) ask for 16 tokens, which caps it
    sim_args = ["sim", "--port", str(sim_port), "--completion-tokens", str(STREAM_TOKENS)]
    with ExitStack() as stack:
        sim = stack.enter_context(rolltap_process(sim_args, sim_url + "/health"))
        gateways = {}
        for dialect in DIALECTS:  # one gateway per upstream dialect: an endpoint has one
            port = free_port()
            gw_url = f"http://127.0.0.1:{port}"
            gw_args = ["gateway", "--endpoint", sim_url + "/v1", "--model", "sim-model",
                       "--dialect", dialect, "--port", str(port), "--multiplex", "128"]  # fmt: skip
            gw = stack.enter_context(rolltap_process(gw_args, gw_url + "/health"))
            gateways[dialect] = (gw_url, gw)
        asyncio.run(measure(args, sim_url, sim, gateways))


if __name__ == "__main__":
    main()
