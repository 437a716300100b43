"""What a third process on the cores costs the other two: gateway_overhead.py's (b) load
(64 rollouts x 100 turns of growing histories) with the CPU of every process split.

    python benchmarks/shared_cores.py [--turns 100] [--rollouts 64] [--repeat 3]

Four runs a mode (non-streaming, then stream), in this order within each repeat:

- ``direct``: the load generator (this process, raw aiohttp) calls the simulator;
- ``direct + spinner``: the same, beside a third process that only spins (``while True:
  pass``), so that what sharing the cores costs shows apart from anything a relay does;
- ``relay uv``: through the bare aiohttp relay on uvloop (_bare_relay.py; nothing
  recorded);
- ``rolltap uv``: through a rolltap gateway with its defaults, on uvloop.

For each: calls/s over direct's in the same repeat, and the CPU a call (user + system, ms)
of the load generator, of the simulator and of the third process. The spinner's row is
what sharing two cores with a third busy process costs direct by itself, the mark to
read the relay's and rolltap's rows against; the load generator's and the simulator's
columns show whether their CPU a call rises beside a third process (gateway_overhead.py
(b) counts any such rise against the gateway in its "CPU-bound ceiling"). Each cell is
the range over the repeats. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import aiohttp
import psutil
from _history_load import Target, throughput
from _procs import bare_relay, cpu_seconds, gateway, simulator_process
from gateway_overhead import register, unregister

RUNS = ("direct", "direct + spinner", "relay uv", "rolltap uv")


@contextmanager
def spinner() -> Iterator[psutil.Process]:
    """A process that spins on a core until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait()


class Runs:
    """Every run's figures, by mode and run, a value per repeat."""

    def __init__(self) -> None:
        self.ratio: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.cpu: dict[tuple[str, str, str], list[float]] = defaultdict(list)

    def table(self) -> None:
        print(
            "| mode | run | calls/s over direct | CPU ms a call: load generator | simulator "
            "| third process |\n|---|---|---|---|---|---|"
        )
        for mode in ("non-streaming", "stream"):
            for run in RUNS:
                cells = [_span(self.ratio[mode, run])]
                for part in ("load generator", "simulator", "third"):
                    values = self.cpu.get((mode, run, part))
                    cells.append(_span(values) if values else "")
                print(f"| {mode} | {run} | " + " | ".join(cells) + " |")


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}"


async def one_run(
    http: aiohttp.ClientSession, targets: list[Target], procs: dict[str, psutil.Process],
    turns: int, *, stream: bool,
) -> tuple[float, dict[str, float]]:  # fmt: skip
    """Calls/s of ``targets`` (one rollout each) and the CPU ms a call of ``procs``."""
    before = {part: cpu_seconds(proc) for part, proc in procs.items()}
    rate = await throughput(http, targets, turns, stream=stream)
    calls = len(targets) * turns
    spent = {part: (cpu_seconds(p) - before[part]) * 1e3 / calls for part, p in procs.items()}
    return rate, spent


Served = tuple[str, psutil.Process]


async def measure(args: argparse.Namespace, sim: Served, relay: Served, ours: Served) -> Runs:
    """Each repeat's runs, every mode (``sim``, ``relay``, ``ours``: each URL and process)."""
    out = Runs()
    shared = {"load generator": psutil.Process(), "simulator": sim[1]}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for rep in range(args.repeat):
            for stream in (False, True):
                mode = "stream" if stream else "non-streaming"
                rates: dict[str, float] = {}
                for run in RUNS:
                    with ExitStack() as stack:
                        procs = dict(shared)
                        targets = [Target("direct", sim[0] + "/v1", "k")] * args.rollouts
                        if run == "direct + spinner":
                            procs["third"] = stack.enter_context(spinner())
                        elif run == "relay uv":
                            targets = [Target("relay", relay[0] + "/v1", "k")] * args.rollouts
                            procs["third"] = relay[1]
                        elif run == "rolltap uv":
                            targets = await register(http, ours[0], args.rollouts, "rolltap")
                            procs["third"] = ours[1]
                        rates[run], spent = await one_run(
                            http, targets, procs, args.turns, stream=stream
                        )
                        if run == "rolltap uv":
                            await unregister(http, ours[0], targets)
                    out.ratio[mode, run].append(rates[run] / rates["direct"])
                    for part, ms in spent.items():
                        out.cpu[mode, run, part].append(ms)
                print(f"repeat {rep + 1} {mode}: " + ", ".join(
                    f"{run} {rate:,.0f}/s" for run, rate in rates.items()
                ), flush=True)  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=100, help="turns of each rollout")
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts at once")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the four runs")
    args = parser.parse_args()
    if min(args.turns, args.rollouts, args.repeat) < 1:
        parser.error("--turns, --rollouts and --repeat must be at least 1")
    with ExitStack() as stack:
        sim = stack.enter_context(simulator_process(16))
        relay = stack.enter_context(bare_relay(sim[0], "uvloop"))
        ours = stack.enter_context(gateway(sim[0], multiplex=args.rollouts))
        runs = asyncio.run(measure(args, sim, relay, ours))
    print(f"\n{args.rollouts} rollouts x {args.turns} turns, {psutil.cpu_count()} cores")
    runs.table()


if __name__ == "__main__":
    main()
