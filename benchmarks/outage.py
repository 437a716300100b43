"""Database outage report: each private server stopped for 30 s during a bigger eval.

For PostgreSQL and MariaDB in turn: a private server (tests/store/privatedb.py, never the
machine's shared ones), an eval of N three-turn rollouts through the simulator, the
server stopped once N/5 results are in and started again after the outage. Prints one
row per database for docs/reliability.md: faults injected, rollouts at risk (started and
not yet durable while the server was down), lost (a rollout missing, or a session short
of events), duplicates (sessions or events stored twice), hangs (the run not finished
within the outage plus --hang-after seconds). Not run in CI.

    python benchmarks/outage.py                    # both servers, 1,000 rollouts, 30 s
    python benchmarks/outage.py --backends mariadb --rollouts 400 --down 10
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

# the test kit's `store` package, not the store benchmark next to this script
sys.path[0] = str(Path(__file__).resolve().parents[1] / "tests")

from rolltap.rollouts import RunResult  # noqa: E402
from rolltap.store import Store, upgrade  # noqa: E402
from store.outagekit import EXPECTED_KINDS, Outage, run_with_outage  # noqa: E402
from store.privatedb import PrivateMariaDB, PrivatePostgres, PrivateServer  # noqa: E402

SERVERS: dict[str, type[PrivateServer]] = {"postgresql": PrivatePostgres, "mariadb": PrivateMariaDB}


@dataclass
class Row:
    backend: str
    faults: int = 0
    at_risk: int = 0
    lost: int = 0
    duplicates: int = 0
    hangs: int = 0
    note: str = ""


async def _count(url: str, run_id: str, n: int) -> tuple[int, int]:
    """(lost, duplicates) in the stored run against the n rollouts it should hold."""
    lost = duplicates = 0
    async with await Store.open(url) as store:
        sessions = await store.list_sessions(run=run_id)
        tasks = [s.task["task_id"] for s in sessions]
        duplicates += len(tasks) - len(set(tasks))
        lost += len({f"t{i}" for i in range(n)} - set(tasks))
        for session in sessions:
            kinds = [e.kind for e in await store.events(session.id)]
            duplicates += max(len(kinds) - len(EXPECTED_KINDS), 0)
            lost += kinds != EXPECTED_KINDS and len(kinds) <= len(EXPECTED_KINDS)
    return lost, duplicates


async def one(backend: str, n: int, c: int, down: float, hang_after: float) -> Row:
    row = Row(backend)
    server = SERVERS[backend]()
    try:
        if not server.running:
            server.start()
        await upgrade(server.url)
        outage = Outage(server, after=max(n // 5, 1), down_s=down)
        try:
            async with asyncio.timeout(down + hang_after):
                result = await run_with_outage(outage, server.url, n, c=c)
        except TimeoutError:
            row.hangs, row.note = 1, f"not finished {hang_after:g} s after the outage"
            return row
        row.faults = 1 if outage.admitted_at_start >= 0 else 0
        row.at_risk = max(outage.admitted_at_start - outage.results_at_start, 0)
        if not isinstance(result, RunResult):
            row.lost, row.note = n, f"run failed: {result}"
            return row
        row.lost, row.duplicates = await _count(server.url, result.run_id, n)
        notes = [note for s in outage.stats if (note := s.describe()) is not None]
        row.note = notes[-1] if notes else "outage never reported"
        return row
    finally:
        server.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(SERVERS), choices=list(SERVERS))
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("-c", type=int, default=64)
    parser.add_argument("--down", type=float, default=30.0, help="outage length (s)")
    parser.add_argument("--hang-after", type=float, default=300.0)
    args = parser.parse_args()
    print("| fault injected | rollouts at risk | lost | duplicates | hangs | last progress note |")
    print("|---|---|---|---|---|---|")
    for backend in args.backends:
        row = asyncio.run(one(backend, args.rollouts, args.c, args.down, args.hang_after))
        fault = f"{backend} server stopped {args.down:g} s mid-eval ({row.faults}x)"
        print(f"| {fault} | {row.at_risk} | {row.lost} | {row.duplicates} | {row.hangs} "
              f"| {row.note} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
