"""What a third process on the cores costs the other two: gateway_overhead.py's (b) load
(64 rollouts x 100 turns of growing histories) with the CPU of every process split.

    python benchmarks/shared_cores.py [--turns 100] [--rollouts 64] [--repeat 3] [--slices 5]

Four runs a mode (non-streaming, then stream), taking turns --slices times within each
repeat (as gateway_overhead.py (b)'s targets do):

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
from _history_load import GrowingLoad, Target, taking_turns
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


Served = tuple[str, psutil.Process]


class Bench:
    """The processes every run uses (``sim``, ``relay``, ``ours``: each URL and
    process), and what each run's turns cost them."""

    def __init__(self, args: argparse.Namespace, sim: Served, relay: Served, ours: Served) -> None:
        self.args, self.sim, self.relay, self.ours = args, sim, relay, ours
        self.shared = {"load generator": psutil.Process(), "simulator": sim[1]}

    def targets(self, run: str) -> list[Target]:
        """The run's rollouts but rolltap's (registered at the gateway), each run with its
        own name in its bodies: the simulator caches answers by the body's bytes, and two
        runs sending the same bytes would share them."""
        name, url = {
            "direct": ("direct", self.sim[0]),
            "direct + spinner": ("spinner", self.sim[0]),
            "relay uv": ("relay", self.relay[0]),
        }[run]
        return [Target(name, url + "/v1", "k")] * self.args.rollouts

    def procs_of(self, run: str, stack: ExitStack) -> dict[str, psutil.Process]:
        """The processes ``run`` is measured by: the shared ones and its third, if any."""
        procs = dict(self.shared)
        if run == "direct + spinner":
            procs["third"] = stack.enter_context(spinner())
        elif run != "direct":
            procs["third"] = (self.relay if run == "relay uv" else self.ours)[1]
        return procs

    async def mode(
        self, http: aiohttp.ClientSession, *, stream: bool
    ) -> tuple[dict[str, GrowingLoad], dict[tuple[str, str], float]]:
        """Every run of one mode, taking turns: each run's load and the CPU seconds each
        of its processes spent, by ``(run, part)``."""
        args = self.args
        ours = await register(http, self.ours[0], args.rollouts, "rolltap")
        loads = {
            run: GrowingLoad(ours if run == "rolltap uv" else self.targets(run), stream=stream)
            for run in RUNS
        }
        spent: dict[tuple[str, str], float] = defaultdict(float)
        for run, size in taking_turns(RUNS, args.turns, args.slices):
            with ExitStack() as stack:
                procs = self.procs_of(run, stack)
                before = {part: cpu_seconds(p) for part, p in procs.items()}
                await loads[run].advance(http, size)
                for part, p in procs.items():
                    spent[run, part] += cpu_seconds(p) - before[part]
        await unregister(http, self.ours[0], ours)
        return loads, spent


async def measure(bench: Bench) -> Runs:
    """Each repeat's runs, every mode. The runs take turns ``--slices`` times, each
    running its rollouts' next turns (who goes first rotating), so that a change in the
    machine's other load lands on all alike."""
    out = Runs()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for rep in range(bench.args.repeat):
            for stream in (False, True):
                mode = "stream" if stream else "non-streaming"
                loads, spent = await bench.mode(http, stream=stream)
                for (run, part), seconds in spent.items():
                    out.cpu[mode, run, part].append(seconds * 1e3 / loads[run].calls)
                for run in RUNS:
                    out.ratio[mode, run].append(loads[run].rate / loads["direct"].rate)
                print(f"repeat {rep + 1} {mode}: " + ", ".join(
                    f"{run} {load.rate:,.0f}/s" for run, load in loads.items()
                ), flush=True)  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=100, help="turns of each rollout")
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts at once")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the four runs")
    parser.add_argument("--slices", type=int, default=5, help="how many times the runs take turns")
    args = parser.parse_args()
    if min(args.turns, args.rollouts, args.repeat) < 1:
        parser.error("--turns, --rollouts and --repeat must be at least 1")
    if not 1 <= args.slices <= args.turns:
        parser.error(f"--slices {args.slices}: from 1 to --turns ({args.turns})")
    with ExitStack() as stack:
        sim = stack.enter_context(simulator_process(16))
        relay = stack.enter_context(bare_relay(sim[0], "uvloop"))
        ours = stack.enter_context(gateway(sim[0], multiplex=args.rollouts))
        runs = asyncio.run(measure(Bench(args, sim, relay, ours)))
    print(f"\n{args.rollouts} rollouts x {args.turns} turns, {psutil.cpu_count()} cores")
    runs.table()


if __name__ == "__main__":
    main()
