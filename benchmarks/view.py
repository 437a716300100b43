"""Viewer benchmark: server time per page for runs of 1,000 / 10,000 / 100,000 sessions.

Each run is filled by bulk insert (tests/view/bulk.py); a child process then serves
the real viewer app over HTTP and times each page (median of 5 after a warm-up),
against the baseline measured in the same child: one indexed ``SELECT`` of a page of
the run's sessions (50 rows by creation time, median of 20). The goal is <= 3x. The
child's peak RSS should be flat in run size (pages hold one page of rows).

    python benchmarks/view.py                          # SQLite and PostgreSQL
    python benchmarks/view.py --backends sqlite --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.store import Store
from rolltap.store.schema import sessions
from rolltap.view import ViewConfig, ViewServer


def _bulk_run() -> Any:
    """The tests' bulk filler (tests/view/bulk.py; this file's own name hides its package)."""
    path = Path(__file__).parents[1] / "tests" / "view" / "bulk.py"
    spec = importlib.util.spec_from_file_location("rolltap_view_bulk", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.bulk_run


PG_ADMIN = os.environ.get(
    "ROLLTAP_TEST_POSTGRES", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
PAGES = {
    "runs": "",
    "run (SQL summary)": "runs/{run}",
    "run failed, by reward": "runs/{run}?status=failed&sort=reward&desc=1",
    "run page 10": "runs/{run}?offset=450",
    "rollout": "sessions/{session}",
    "run (stored summary)": "runs/{run}",
}


async def _median_ms(call: Any, repeats: int) -> float:
    await call()  # warm-up: caches, connections, templates
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        await call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def _child(url: str, run_id: str, session_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with await Store.open(url) as store:
        query = (
            select(sessions.c.id, sessions.c.status, sessions.c.reward, sessions.c.task_id)
            .where(sessions.c.run_id == run_id)
            .order_by(sessions.c.created_at, sessions.c.id)
            .limit(50)
        )

        async def baseline() -> None:
            async with store.engine.connect() as conn:
                (await conn.execute(query)).all()

        out["baseline"] = await _median_ms(baseline, 20)
        async with ViewServer(store, ViewConfig(port=0)) as server, aiohttp.ClientSession() as http:
            for name, path in PAGES.items():
                if name == "run (stored summary)":
                    await store.write_run_summary(run_id, (await store.run_summary(run_id)))
                target = server.url + path.format(run=run_id, session=session_id)

                async def get(target: str = target) -> None:
                    async with http.get(target) as resp:
                        assert resp.status == 200, await resp.text()
                        await resp.read()

                out[name] = await _median_ms(get, 5)
    out["rss_mb"] = _peak_rss_mb()
    return out


def _peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (Linux), which starts afresh at exec; ru_maxrss
    keeps the forking parent's peak, so it grew with the size the parent had filled."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _fill(url: str, n: int) -> tuple[str, str]:
    async with await Store.open(url, upgrade=True) as store:
        run_id, session_id = await _bulk_run()(store, n)
        if store.backend == "postgresql":
            # what autovacuum does after a bulk load: the planner's statistics
            async with store.engine.begin() as conn:
                await conn.exec_driver_sql("ANALYZE")
        return str(run_id), str(session_id)


async def _admin(statement: str) -> None:
    engine = create_async_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql(statement)
    finally:
        await engine.dispose()


def _measure(url: str, n: int) -> dict[str, Any]:
    run_id, session_id = asyncio.run(_fill(url, n))
    done = subprocess.run(
        [sys.executable, __file__, "--child", url, run_id, session_id],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _one(backend: str, n: int, tmp: Path) -> dict[str, Any]:
    if backend == "sqlite":
        return _measure(f"sqlite:///{tmp / f'view{n}.db'}", n)
    name = f"rt_bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f"CREATE DATABASE {name}"))
    try:
        return _measure(f"postgresql://postgres@127.0.0.1:5432/{name}", n)
    finally:
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def _table(rows: list[tuple[str, int, dict[str, Any]]]) -> None:
    names = list(PAGES)
    head = ["backend", "sessions", "SELECT ms", *names, "peak RSS MB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for backend, n, r in rows:
        base = r["baseline"]
        cells = [f"{r[p]:.1f} ms ({r[p] / base:.1f}x)" for p in names]
        print(
            f"| {backend} | {n:,} | {base:.2f} | " + " | ".join(cells) + f" | {r['rss_mb']:.0f} |"
        )


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(asyncio.run(_child(*sys.argv[2:]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            for n in args.sizes:
                rows.append((backend, n, _one(backend, n, Path(tmp))))
                print(f"{backend} {n:,}: done", file=sys.stderr)
    _table(rows)


if __name__ == "__main__":
    main()
