"""Gateway overhead: direct, a bare relay and rolltap side by side, in the same run.

    python benchmarks/gateway_overhead.py [--histories 2,20,100,400] [--samples 600]
                                          [--turns 100] [--rollouts 64] [--rounds 10]
                                          [--repeat 1] [--quick]

Three targets: the simulator called directly, a bare aiohttp relay (_bare_relay.py:
parse, forward, parse, respond; nothing recorded) and a rolltap gateway with its
defaults (routing headers, retry bookkeeping; no OTel, no token capture), all chat.

(a) c = 1, histories of 2 / 20 / 100 / 400 messages (a new turn each call, the rest
    already sent): p50 per call and time to first chunk of a stream, and what the relay
    and rolltap add to direct; the ratio rolltap/relay of the added p50 (goal <= 1.5)
    and what rolltap adds to the time to first chunk beyond the relay (goal <= 1 ms: like
    the other goals, against the bare relay, which alone adds 0.7-1.3 ms on this machine
    at 2-400 messages, so no gateway that parses the body could meet it against direct);
(b) 64 rollouts x 100 turns of growing histories, stream and not: calls per second,
    relay/direct, rolltap/direct and rolltap/relay (goal >= 0.7), CPU per call;
(d) for every harness x upstream dialect pair (one gateway process per upstream
    dialect): added p50 per non-streaming call, added stream time per upstream chunk and
    the gateway's CPU per call, against the simulator called directly in the harness's
    dialect (see _dialect_load.py).
--repeat runs (a) and (b) again, to show how much they move on this machine. The load
generator is raw aiohttp. --quick: fewer samples, a rough run in about a minute. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from _dialect_load import DIALECTS, STREAM_TOKENS, Matrix, run_matrix
from _dialect_table import print_matrix
from _history_load import History, Target, c1_latencies, throughput
from _procs import cpu_seconds, free_port, rolltap_process, running

_GOAL_RATIO = 1.5
_GOAL_RATE = 0.7
_GOAL_TTFC_MS = 1.0


async def register(http: aiohttp.ClientSession, admin: str, n: int) -> list[Target]:
    out = []
    for _ in range(n):
        async with http.post(
            admin + "/rollouts", headers={"Authorization": "Bearer bench"}
        ) as resp:
            data: dict[str, Any] = await resp.json()
        out.append(Target("rolltap", data["openai_base_url"], data["api_key"]))
    return out


def print_c1(rows: list[History]) -> None:
    print("\n(a) c = 1: p50 per call (ms), time to first chunk of a stream (ms)")
    print(
        "| history sent | direct p50 | + bare relay | + rolltap | rolltap/relay (<= 1.5) "
        "| direct TTFC | + relay | + rolltap | rolltap - relay (<= 1 ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        d, b, g = (r.p50(n) for n in ("direct", "relay", "rolltap"))
        fd, fb, fg = (r.p50(n, stream=True) for n in ("direct", "relay", "rolltap"))
        ratio = (g - d) / (b - d) if b > d else float("inf")
        ok = "ok" if ratio <= _GOAL_RATIO else "MISS"
        first_ok = "ok" if fg - fb <= _GOAL_TTFC_MS else "MISS"
        print(
            f"| {r.messages} messages ({r.kbytes:.0f} KB) | {d:.3f} | +{b - d:.3f} | "
            f"+{g - d:.3f} | {ratio:.2f} {ok} | {fd:.3f} | +{fb - fd:.3f} | +{fg - fd:.3f} | "
            f"{fg - fb:+.3f} {first_ok} |"
        )


def print_rates(rows: list[tuple[str, dict[str, float], dict[str, float], int]]) -> None:
    print("\n(b) 64 rollouts x 100 turns, growing histories: calls/s, CPU ms per call")
    print(
        "| | direct | bare relay | rolltap | relay/direct | rolltap/direct "
        "| rolltap/relay (>= 0.7) | relay CPU | rolltap CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, rate, cpu, calls in rows:
        d, b, g = (rate[n] for n in ("direct", "relay", "rolltap"))
        ok = "ok" if g / b >= _GOAL_RATE else "MISS"
        per = {k: v * 1000.0 / calls for k, v in cpu.items()}
        print(
            f"| {label} | {d:,.0f} | {b:,.0f} | {g:,.0f} | {b / d:.2f} | {g / d:.2f} | "
            f"{g / b:.2f} {ok} | {per['relay']:.2f} | {per['rolltap']:.2f} |"
        )


async def rates(
    http: aiohttp.ClientSession, targets: dict[str, list[Target]],
    procs: dict[str, psutil.Process], turns: int, *, stream: bool,
) -> tuple[dict[str, float], dict[str, float]]:  # fmt: skip
    """Calls/s per target, and CPU seconds of the relay and rolltap during their runs."""
    out, cpu = {}, {}
    for name, rollouts in targets.items():
        proc = procs.get(name)
        cpu0 = cpu_seconds(proc) if proc else 0.0
        out[name] = await throughput(http, rollouts, turns, stream=stream)
        if proc:
            cpu[name] = cpu_seconds(proc) - cpu0
    return out, cpu


async def measure(args: argparse.Namespace, sim_url: str, relay_url: str,
                  procs: dict[str, psutil.Process],
                  gateways: dict[str, tuple[str, psutil.Process]]) -> None:  # fmt: skip
    gw_admin, _ = gateways["chat"]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        direct, relay = (
            Target("direct", sim_url + "/v1", "k"),
            Target("relay", relay_url + "/v1", "k"),
        )
        for rep in range(args.repeat):
            if args.repeat > 1:
                print(f"\n## repeat {rep + 1} of {args.repeat}")
            rows = []
            for n in args.histories:
                (gw,) = await register(http, gw_admin, 1)
                rows.append(await c1_latencies(http, [direct, relay, gw], n, args.samples))
            print_c1(rows)
            table = []
            for stream in (False, True):
                many = await register(http, gw_admin, args.rollouts)
                targets = {"direct": [direct] * args.rollouts,
                           "relay": [relay] * args.rollouts, "rolltap": many}  # fmt: skip
                rate, cpu = await rates(http, targets, procs, args.turns, stream=stream)
                calls = args.rollouts * args.turns
                table.append(("stream" if stream else "non-streaming", rate, cpu, calls))
            print_rates(table)
            sys.stdout.flush()
        if args.rounds > 0:
            print_matrix(await run_matrix(http, sim_url, gateways, args.matrix))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--histories", default="2,20,100,400")
    parser.add_argument("--samples", type=int, default=600, help="(a) calls per target and length")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=10, help="(d) rounds; 0 skips (d)")
    parser.add_argument("--repeat", type=int, default=1, help="run (a) and (b) this many times")
    parser.add_argument("--quick", action="store_true", help="a rough run in about a minute")
    args = parser.parse_args()
    args.histories = [int(h) for h in args.histories.split(",")]
    if args.quick:
        args.samples, args.turns, args.rounds = 150, 20, min(args.rounds, 2)
    block, stream_block = (80, 16) if args.quick else (200, 50)
    args.matrix = Matrix(args.rounds, block, stream_block)
    sim_port, relay_port = free_port(), free_port()
    sim_url, relay_url = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{relay_port}"
    # streams in (d) are STREAM_TOKENS long; (a)-(b) ask for 16 tokens, which caps it
    sim_args = ["sim", "--port", str(sim_port), "--completion-tokens", str(STREAM_TOKENS)]
    relay_cmd = [sys.executable, str(Path(__file__).with_name("_bare_relay.py")),
                 "--port", str(relay_port), "--upstream", sim_url]  # fmt: skip
    with ExitStack() as stack:
        stack.enter_context(rolltap_process(sim_args, sim_url + "/health"))
        relay = stack.enter_context(running(relay_cmd, relay_url + "/health"))
        gateways = {}
        for dialect in DIALECTS:  # one gateway per upstream dialect: an endpoint has one
            port = free_port()
            gw_url = f"http://127.0.0.1:{port}"
            gw_args = ["gateway", "--endpoint", sim_url + "/v1", "--model", "sim-model",
                       "--dialect", dialect, "--port", str(port), "--multiplex", "128"]  # fmt: skip
            gw = stack.enter_context(rolltap_process(gw_args, gw_url + "/health"))
            gateways[dialect] = (gw_url, gw)
        procs = {"relay": relay, "rolltap": gateways["chat"][1]}
        asyncio.run(measure(args, sim_url, relay_url, procs, gateways))


if __name__ == "__main__":
    main()
