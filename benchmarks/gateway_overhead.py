"""Gateway overhead: direct, a bare relay and rolltap side by side, in the same run, each
relay on asyncio's event loop and on uvloop's.

    python benchmarks/gateway_overhead.py [--histories 2,20,100,400] [--samples 600]
                                          [--turns 100] [--rollouts 64] [--rounds 10]
                                          [--repeat 1] [--slices 5] [--quick]
                                          [--baseline-src DIR]

Five targets: the simulator called directly (on asyncio, as before uvloop, so "direct"
stays one baseline), a bare aiohttp relay (_bare_relay.py: parse, forward, parse,
respond; nothing recorded) on asyncio and on uvloop, and a rolltap gateway with its
defaults (routing headers, retry bookkeeping; no OTel, no token capture) with
``ROLLTAP_LOOP=asyncio`` and on its default loop (uvloop), all chat.

(a) c = 1, histories of 2 / 20 / 100 / 400 messages (a new turn each call, the rest
    already sent): p50 per call and time to first chunk of a stream, what each adds to
    direct, and the CPU per call of the relay and of rolltap (a third of the calls
    streamed); goals (issue 28): rolltap on uvloop adds <= 1.2 x what the asyncio relay
    adds, its first chunk comes <= 0.3 ms after the asyncio relay's, and at 400 messages
    its CPU per call is <= 1.2 x the relay's;
(b) 64 rollouts x 100 turns of growing histories, stream and not: calls per second of
    each, each over direct (goal: rolltap on uvloop >= 0.7 x direct), CPU per call, and
    the CPU-bound ceiling of that ratio: direct's CPU a call over the rolltap run's, all
    the processes counted (where the load generator, the simulator and the gateway
    share cores that direct keeps busy, the most of direct's rate the gateway could
    reach spending what it spends). The targets take turns --slices times (default 5:
    20 turns of all 64 rollouts each, who goes first rotating), so that a change in
    the machine's other load during the measurement lands on every target alike;
    --slices 1 runs each target's 100 turns in turn;
(d) for every harness x upstream dialect pair (one gateway process per upstream
    dialect, on its default loop): added p50 per non-streaming call, added stream time per
    upstream chunk and the gateway's CPU per call, against the simulator called directly
    in the harness's dialect (see _dialect_load.py).
--repeat runs (a) and (b) again, to show how much they move on this machine (judge a
goal over 3). --baseline-src DIR (a checkout's src/ folder: the code before a change)
adds its gateway (on uvloop) to (a), interleaved with the others, a line per length, and
gives it (b)'s load too (a line per mode), so that both have the same past. Every
rollout registered for a measurement is ended after it (as a user would), so no gateway
carries one measurement's histories into the next. The load generator is raw aiohttp.
--quick: fewer samples, a rough run in a few minutes. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import psutil
from _dialect_load import DIALECTS, STREAM_TOKENS, Matrix, run_matrix
from _dialect_table import print_matrix
from _history_load import GrowingLoad, History, Target, c1_latencies, taking_turns
from _procs import bare_relay, baseline_src, cpu_seconds, gateway, simulator_process

_GOAL_RATIO = 1.2
_GOAL_RATE = 0.7
_GOAL_TTFC_MS = 0.3
_GOAL_CPU = 1.2
#: the relays measured, asyncio's loop first (the goals' baseline)
RELAYS = ("relay", "relay-uv", "rolltap", "rolltap-uv")


async def register(http: aiohttp.ClientSession, admin: str, n: int, name: str) -> list[Target]:
    out = []
    for _ in range(n):
        async with http.post(
            admin + "/rollouts", headers={"Authorization": "Bearer bench"}
        ) as resp:
            data: dict[str, Any] = await resp.json()
        out.append(Target(name, data["openai_base_url"], data["api_key"], data["id"]))
    return out


async def unregister(http: aiohttp.ClientSession, admin: str, targets: list[Target]) -> None:
    """End the rollouts of ``targets``, as a user would once they are done (a gateway
    would carry their logs, the 64 x 100 histories among them, into the next
    measurement)."""
    for rollout in {t.rollout for t in targets if t.rollout is not None}:
        async with http.delete(
            f"{admin}/rollouts/{rollout}", headers={"Authorization": "Bearer bench"}
        ) as resp:
            if resp.status != 200:
                raise RuntimeError(f"DELETE rollout {rollout}: HTTP {resp.status}")


def print_c1(rows: list[History]) -> None:
    print(
        "\n(a) c = 1: what each adds to direct's p50 per call, and to its time to first chunk (ms)"
    )
    print(
        "| history sent | direct p50 | + relay | + relay uv | + rolltap | + rolltap uv "
        f"| rolltap uv / relay (<= {_GOAL_RATIO}) | direct TTFC | + relay | + rolltap uv "
        f"| rolltap uv - relay (<= {_GOAL_TTFC_MS} ms) | CPU/call relay, rolltap uv "
        f"(ratio <= {_GOAL_CPU}) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        d = r.p50("direct")
        add = {n: r.p50(n) - d for n in RELAYS}
        fd = r.p50("direct", stream=True)
        first = {n: r.p50(n, stream=True) - fd for n in ("relay", "rolltap-uv")}
        ratio = add["rolltap-uv"] / add["relay"] if add["relay"] > 0 else float("inf")
        ok = "ok" if ratio <= _GOAL_RATIO else "MISS"
        gap = first["rolltap-uv"] - first["relay"]
        first_ok = "ok" if gap <= _GOAL_TTFC_MS else "MISS"
        added = " | ".join(f"+{add[n]:.3f}" for n in RELAYS)
        cpu = r.cpu_ms["rolltap-uv"] / r.cpu_ms["relay"]
        # the goal is at 400 messages; shorter histories show the ratio only
        cpu_ok = "" if r.messages < 400 else " ok" if cpu <= _GOAL_CPU else " MISS"
        print(
            f"| {r.messages} messages ({r.kbytes:.0f} KB) | {d:.3f} | {added} | {ratio:.2f} {ok} "
            f"| {fd:.3f} | +{first['relay']:.3f} | +{first['rolltap-uv']:.3f} "
            f"| {gap:+.3f} {first_ok} | {r.cpu_ms['relay']:.3f}, {r.cpu_ms['rolltap-uv']:.3f} "
            f"({cpu:.2f}{cpu_ok}) |"
        )
    for r in rows:
        if "base-uv" not in r.total:
            continue
        d, fd = r.p50("direct"), r.p50("direct", stream=True)
        base, now = (r.p50(n) - d for n in ("base-uv", "rolltap-uv"))
        base_first, now_first = (r.p50(n, stream=True) - fd for n in ("base-uv", "rolltap-uv"))
        print(
            f"  {r.messages} messages, --baseline-src then this code: added p50 +{base:.3f} / "
            f"+{now:.3f}, first chunk +{base_first:.3f} / +{now_first:.3f}"
        )


@dataclass
class Rates:
    """(b) in one mode: calls/s per target, and the CPU seconds spent during its run by
    its own process (``own``: a relay's, a gateway's; direct has none) and by all the
    processes the run used (``total``: the load generator and the simulator too)."""

    label: str
    calls: int
    rate: dict[str, float] = field(default_factory=dict)
    own: dict[str, float] = field(default_factory=dict)
    total: dict[str, float] = field(default_factory=dict)

    def ms(self, seconds: float) -> float:
        return seconds * 1000.0 / self.calls


def print_rates(rows: list[Rates]) -> None:
    print("\n(b) 64 rollouts x 100 turns, growing histories: calls/s, over direct, CPU ms per call")
    print(
        "| | direct | relay | relay uv | rolltap | rolltap uv "
        f"| rolltap uv / direct (>= {_GOAL_RATE}) | relay / direct | relay CPU | rolltap uv CPU "
        "| CPU a call, all processes: direct, rolltap uv run | CPU-bound ceiling |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        d, rate = r.rate["direct"], r.rate
        ok = "ok" if rate["rolltap-uv"] / d >= _GOAL_RATE else "MISS"
        each = " | ".join(f"{rate[n]:,.0f}" for n in RELAYS)
        direct_cpu, ours_cpu = r.total["direct"], r.total["rolltap-uv"]
        print(
            f"| {r.label} | {d:,.0f} | {each} | {rate['rolltap-uv'] / d:.2f} {ok} "
            f"| {rate['relay'] / d:.2f} | {r.ms(r.own['relay']):.2f} "
            f"| {r.ms(r.own['rolltap-uv']):.2f} | {r.ms(direct_cpu):.2f}, {r.ms(ours_cpu):.2f} "
            f"| {direct_cpu / ours_cpu:.2f} |"
        )
    cores = psutil.cpu_count() or 1
    print(
        "  CPU-bound ceiling: direct's CPU a call over the rolltap uv run's, every process "
        "counted (load generator, simulator, gateway) -- the most of direct's rate that run "
        "can reach where the three processes share cores that direct keeps busy"
        + (f" (as here: {cores} cores)" if cores < 3 else
           f"; here ({cores} cores) each may have one of its own, and the ceiling need not bind")
    )  # fmt: skip
    for r in rows:
        if "base-uv" in r.rate:
            d = r.rate["direct"]
            print(
                f"  {r.label}, --baseline-src then this code: {r.rate['base-uv']:,.0f} / "
                f"{r.rate['rolltap-uv']:,.0f} calls/s ({r.rate['base-uv'] / d:.2f} / "
                f"{r.rate['rolltap-uv'] / d:.2f} of direct), CPU {r.ms(r.own['base-uv']):.2f} / "
                f"{r.ms(r.own['rolltap-uv']):.2f} ms a call"
            )


async def rates(
    http: aiohttp.ClientSession, targets: dict[str, list[Target]],
    procs: dict[str, psutil.Process], shared: list[psutil.Process], turns: int, *,
    stream: bool, slices: int,
) -> Rates:  # fmt: skip
    """Each target's run: its calls/s, its own process's CPU and every process's
    (``shared``: the load generator and the simulator, which every run uses). The targets
    take turns ``slices`` times, each running its rollouts' next turns (who goes first
    rotating), so that a change in the machine's other load lands on all of them alike."""
    out = Rates("stream" if stream else "non-streaming", len(targets["direct"]) * turns)
    loads = {name: GrowingLoad(rollouts, stream=stream) for name, rollouts in targets.items()}
    for name, size in taking_turns(list(loads), turns, slices):
        own = procs.get(name)
        watched = [*shared, *([own] if own else [])]
        before = [cpu_seconds(p) for p in watched]
        await loads[name].advance(http, size)
        spent = [cpu_seconds(p) - b for p, b in zip(watched, before, strict=True)]
        out.total[name] = out.total.get(name, 0.0) + sum(spent)
        if own:
            out.own[name] = out.own.get(name, 0.0) + spent[-1]
    out.rate = {name: load.rate for name, load in loads.items()}
    return out


async def measure(args: argparse.Namespace, sim_url: str, sim: psutil.Process,
                  relays: dict[str, str],
                  procs: dict[str, psutil.Process], admins: dict[str, str],
                  gateways: dict[str, tuple[str, psutil.Process]],
                  base: dict[str, str]) -> None:  # fmt: skip
    """``sim``: the simulator's process; ``relays``: each bare relay's URL by name;
    ``admins``: each rolltap's admin URL; ``base``: the --baseline-src gateway's, measured
    in (a) and given (b)'s load."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        direct = Target("direct", sim_url + "/v1", "k")
        bare = {name: Target(name, url + "/v1", "k") for name, url in relays.items()}
        measured = admins | base  # every rolltap gateway, the baseline's too
        for rep in range(args.repeat):
            if args.repeat > 1:
                print(f"\n## repeat {rep + 1} of {args.repeat}")
            rows = []
            for n in args.histories:
                ours = {name: (await register(http, admin, 1, name))[0]
                        for name, admin in measured.items()}  # fmt: skip
                cpu0 = {name: cpu_seconds(proc) for name, proc in procs.items()}
                row = await c1_latencies(
                    http, [direct, *bare.values(), *ours.values()], n, args.samples
                )
                row.cpu_ms = {name: (cpu_seconds(proc) - cpu0[name]) * 1000.0 / row.calls
                              for name, proc in procs.items()}  # fmt: skip
                rows.append(row)
                for name, admin in measured.items():
                    await unregister(http, admin, [ours[name]])
            print_c1(rows)
            table = []
            shared = [psutil.Process(), sim]  # the load generator (this process), the simulator
            for stream in (False, True):
                targets = {"direct": [direct] * args.rollouts}
                targets |= {name: [t] * args.rollouts for name, t in bare.items()}
                # the baseline gateway takes the same load, so that (a)'s next repeat
                # compares two gateways with the same past (a heap grown by the load
                # costs ~40 us a call at c = 1)
                for name, admin in measured.items():
                    targets[name] = await register(http, admin, args.rollouts, name)
                table.append(await rates(http, targets, procs, shared, args.turns,
                                         stream=stream, slices=args.slices))  # fmt: skip
                for name, admin in measured.items():
                    await unregister(http, admin, targets[name])
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
    parser.add_argument(
        "--slices", type=int, default=5,
        help="(b): the targets take turns this many times (1: each runs all its turns in turn)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a rough run in about a minute")
    parser.add_argument("--baseline-src", help="a src/ folder whose gateway (a) also measures")
    args = parser.parse_args()
    args.histories = [int(h) for h in args.histories.split(",")]
    if args.quick:
        args.samples, args.turns, args.rounds = 150, 20, min(args.rounds, 2)
    if not 1 <= args.slices <= args.turns:
        parser.error(f"--slices {args.slices}: from 1 to --turns ({args.turns})")
    base_src = baseline_src(parser, args.baseline_src)
    block, stream_block = (80, 16) if args.quick else (200, 50)
    args.matrix = Matrix(args.rounds, block, stream_block)
    on_asyncio = {**os.environ, "ROLLTAP_LOOP": "asyncio"}
    with ExitStack() as stack:
        # streams in (d) are STREAM_TOKENS long; (a)-(b) ask for 16 tokens, which caps it
        sim_url, sim = stack.enter_context(simulator_process(STREAM_TOKENS))
        relays, procs = {}, {}
        for name, loop in (("relay", "asyncio"), ("relay-uv", "uvloop")):
            relays[name], procs[name] = stack.enter_context(bare_relay(sim_url, loop))
        gateways, admins = {}, {}
        for dialect in DIALECTS:  # one gateway per upstream dialect: an endpoint has one
            served = gateway(sim_url, dialect=dialect, multiplex=128)
            gateways[dialect] = stack.enter_context(served)
        admins["rolltap-uv"], procs["rolltap-uv"] = gateways["chat"]
        admins["rolltap"], procs["rolltap"] = stack.enter_context(
            gateway(sim_url, env=on_asyncio, multiplex=128)
        )
        admins = {name: admins[name] for name in ("rolltap", "rolltap-uv")}
        base: dict[str, str] = {}
        if base_src is not None:  # the code before a change, beside it in (a)
            base["base-uv"], procs["base-uv"] = stack.enter_context(
                gateway(sim_url, src=base_src, multiplex=128)
            )
        asyncio.run(measure(args, sim_url, sim, relays, procs, admins, gateways, base))


if __name__ == "__main__":
    main()
