"""Soak: trainer-style clients keep ``rolltap serve`` busy; worker memory and files stay flat.

``rolltap sim`` (with a little latency and 1% upstream 500s) and ``rolltap serve`` run
as processes. ``--trainers`` clients each loop: submit a batch, read every result off
its stream, repeat (backing off on 429). Most rollouts are 3-turn ``chat``; one in
eight runs a subprocess agent. Every 5 s the service's ``/status`` gives each worker's
own heartbeat (RSS, open files). Each worker's RSS is also read idle before the load
and idle after it (after its trims). At the end the service is stopped with SIGTERM (it
must exit 0) and every reported rollout is looked up in the store. Prints per worker:
idle before/after, first/last-quarter medians under load and the trend (the first 10%
of the run, the warm-up, left out); totals; writes benchmarks/out/soak.png.

    python benchmarks/soak.py                   # one hour
    python benchmarks/soak.py --duration 120    # two minutes
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _procs import free_port, rolltap_process
from _rss import MB, OUT, Series, plot_series, slope

from rolltap.errors import ServiceFullError, ServiceUnreachableError
from rolltap.serve import RolloutSpec, ServeClient, ServeResult
from rolltap.store import Store

AGENT = Path(__file__).parent / "_screenshot_agent.py"
TOKEN = "soak-token"
SAMPLE_S = 2.0
STATS_S = 2.0
CLI = "from rolltap.cli.main import main; main()"


@contextmanager
def serve_process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, ROLLTAP_SERVE_TOKEN=TOKEN)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _spec(n: int) -> RolloutSpec:
    if n % 8 == 7:
        task = {"id": f"agent{n}", "prompt": "browse", "info": {"turns": 3, "kb": 20}}
        return RolloutSpec(task=task, cmd=f"{sys.executable} {AGENT}")
    messages = [{"role": "user", "content": f"q{n}.{i}"} for i in range(3)]
    return RolloutSpec(task={"id": f"chat{n}", "messages": messages}, rewards=["regex"])


async def trainer(client: ServeClient, batch: int, until: float, log: dict[str, Any]) -> None:
    """Submit a batch, read all of it, repeat until ``until`` (monotonic)."""
    n = 0
    while time.monotonic() < until:
        specs = [_spec(n + i) for i in range(batch)]
        n += batch
        started = time.monotonic()
        try:
            results: list[ServeResult] = [r async for r in client.submit_batch(specs)]
        except ServiceFullError as err:
            log["full"] += 1
            await asyncio.sleep(err.retry_after or 1.0)
            continue
        log["batch_s"].append(time.monotonic() - started)
        log["results"].extend(results)


async def watch(client: ServeClient, until: float, series: dict[int, Series], t0: float) -> None:
    while time.monotonic() < until:
        status = await client.status()
        for worker in status["workers"]:
            stats = worker["stats"]
            if "rss" not in stats:
                continue
            s = series.setdefault(worker["index"], Series(f"worker {worker['index']}"))
            s.t.append(time.monotonic() - t0)
            s.rss.append(stats["rss"])
            s.files.append(stats["open_files"])
        await asyncio.sleep(SAMPLE_S)


async def drive(url: str, args: argparse.Namespace) -> tuple[dict[str, Any], dict[int, Series]]:
    log: dict[str, Any] = {"full": 0, "batch_s": [], "results": []}
    series: dict[int, Series] = {}
    t0 = time.monotonic()
    until = t0 + args.duration
    async with ServeClient(url, TOKEN, read_timeout_s=120.0) as client:
        status = await client.status()
        while not all("rss" in w["stats"] for w in status["workers"]):
            await asyncio.sleep(0.2)  # each worker's first heartbeat
            status = await client.status()
        log["idle_before"] = _idle_rss(status)
        async with asyncio.TaskGroup() as group:
            group.create_task(watch(client, until, series, t0))
            for _ in range(args.trainers):
                group.create_task(trainer(client, args.batch, until, log))
        await asyncio.sleep(3 * STATS_S)  # idle: each worker trims, then reports
        log["status"] = await client.status()
        log["idle_after"] = _idle_rss(log["status"])
    return log, series


def _idle_rss(status: dict[str, Any]) -> dict[int, float]:
    return {w["index"]: w["stats"].get("rss", 0) / MB for w in status["workers"]}


async def verify(store_url: str, results: list[ServeResult]) -> int:
    """How many reported rollouts the store lacks or holds with another status."""
    async with await Store.open(store_url) as store:
        stored = {}
        for run_id in {r.run_id for r in results}:
            stored.update({s.id: s.status for s in await store.list_sessions(run=run_id)})
    return sum(1 for r in results if stored.get(r.id) != r.status)


def _quarters(values: list[float]) -> tuple[float, float]:
    q = max(1, len(values) // 4)
    return statistics.median(values[:q]), statistics.median(values[-q:])


def report(log: dict[str, Any], series: dict[int, Series], missing: int, code: int) -> None:
    results: list[ServeResult] = log["results"]
    print("\nworker RSS MB: idle before/after, under load q1/q4/max, trend; open files q1/q4/max")
    print(f"{'worker':<7}{'before':>7}{'after':>7}{'q1':>6}{'q4':>6}{'max':>6}{'MB/10min':>9}"
          f"{'files q1':>9}{'q4':>5}{'max':>5}")  # fmt: skip
    for index, s in sorted(series.items()):
        skip = len(s.rss) // 10  # the warm-up
        rss = [r / MB for r in s.rss[skip:]]
        q1, q4 = _quarters(rss)
        per_10min = slope(rss) * (600 / SAMPLE_S)
        f1, f4 = _quarters([float(f) for f in s.files[skip:]])
        before, after = log["idle_before"].get(index, 0.0), log["idle_after"].get(index, 0.0)
        print(f"{index:<7}{before:>7.0f}{after:>7.0f}{q1:>6.0f}{q4:>6.0f}{max(rss):>6.0f}"
              f"{per_10min:>9.1f}{f1:>9.0f}{f4:>5.0f}{max(s.files):>5}")  # fmt: skip
    times = log["batch_s"]
    statuses = Counter(r.status for r in results)
    print(f"\nrollouts {len(results):,} in {len(times)} batches; statuses {dict(statuses)}")
    print(f"batch seconds: median {statistics.median(times):.2f}, max {max(times):.2f}; "
          f"429s {log['full']}; worker restarts {log['status']['restarts']}")  # fmt: skip
    print(f"not stored as reported: {missing}; serve exit status after SIGTERM: {code}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trainers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    sim_port, serve_port = free_port(), free_port()
    sim_args = ["sim", "--port", str(sim_port), "--ttft-ms", "20", "--tokens-per-s", "400",
                "--fault", "status=500@0.01"]  # fmt: skip
    with (
        tempfile.TemporaryDirectory() as tmp,
        rolltap_process(sim_args, f"http://127.0.0.1:{sim_port}/health"),
    ):
        store_url = f"sqlite:///{tmp}/soak.db"
        serve_args = ["--endpoint", f"http://127.0.0.1:{sim_port}/v1", "--model", "sim-model",
                      "--workers", str(args.workers), "--port", str(serve_port),
                      "--store", store_url, "--stats-interval", str(STATS_S),
                      "--max-inflight", "32"]  # fmt: skip
        with serve_process(serve_args, Path(tmp) / "serve.log") as proc:
            url = f"http://127.0.0.1:{serve_port}"
            await _healthy(url, proc)
            log, series = await drive(url, args)
            proc.terminate()
            code = await asyncio.to_thread(proc.wait, 120)
        missing = await verify(store_url, log["results"])
    report(log, series, missing, code)
    plot_series(list(series.values()), OUT / "soak.png", "rolltap serve soak: worker RSS")


async def _healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    async with ServeClient(url, TOKEN) as client:
        for _ in range(600):
            if proc.poll() is not None:
                raise SystemExit("rolltap serve exited early")
            try:
                await client.health()
                return
            except ServiceUnreachableError:
                await asyncio.sleep(0.2)  # not listening yet
    raise SystemExit("rolltap serve never became healthy")


if __name__ == "__main__":
    asyncio.run(main())
