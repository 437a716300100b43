"""A standalone ``rolltap gateway --store`` under seed 004's churn, trim on and off.

Seed 004's shape (as benchmarks/memory.py for serve workers): waves of ``--concurrency``
rollouts of ``--turns`` turns, each turn resending the whole history plus a fresh ~``--kb``
KB base64 screenshot, through a ``rolltap gateway`` process in front of the simulator,
persisting to SQLite. The agents are subprocesses (benchmarks/_screenshot_agent.py)
registered over the admin API, so only the gateway's own RSS is sampled (every 0.1 s).
After a 2-turn warm-up and after every wave the gateway idles for two trim intervals and
its resting RSS is read. One row per variant: ``ROLLTAP_TRIM_INTERVAL_S`` = the interval
(every gateway trims, off its loop) against 0 (never).

    python benchmarks/gateway_memory.py                        # 5 waves × 4 × 45 × 200 KB
    python benchmarks/gateway_memory.py --waves 2 --turns 10   # quick look
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
from _procs import free_port, rolltap_process, running
from _rss import OUT, Sampler, Series, measure_churn, plot_series, slope

AGENT = Path(__file__).parent / "_screenshot_agent.py"
GOALS = {"peak": 275.0, "ratio": 1.3}
HEADERS = {"Authorization": "Bearer bench"}


@dataclass
class Outcome:
    label: str
    baseline: float = 0.0
    resting: list[float] = field(default_factory=list)
    wave_peaks: list[float] = field(default_factory=list)
    series: Series | None = None


async def _agent(http: aiohttp.ClientSession, admin: str, turns: int, kb: int, tmp: Path) -> None:
    async with http.post(admin + "/rollouts", json={}, headers=HEADERS) as resp:
        rollout = await resp.json()
    task = tmp / f"{rollout['id']}.json"
    task.write_bytes(orjson.dumps({"id": "shot", "info": {"turns": turns, "kb": kb}}))
    env = dict(os.environ, OPENAI_BASE_URL=rollout["openai_base_url"],
               OPENAI_API_KEY=rollout["api_key"], ROLLTAP_MODEL="m",
               ROLLTAP_TASK_FILE=str(task), ROLLTAP_RESULT_FILE=str(task) + ".out")  # fmt: skip
    proc = await asyncio.create_subprocess_exec(sys.executable, str(AGENT), env=env)
    if await proc.wait() != 0:
        raise SystemExit("an agent failed")
    async with http.delete(f"{admin}/rollouts/{rollout['id']}", headers=HEADERS) as resp:
        assert resp.status == 200, resp.status


async def _wave(admin: str, n: int, turns: int, kb: int, tmp: Path) -> None:
    async with aiohttp.ClientSession() as http, asyncio.TaskGroup() as group:
        for _ in range(n):
            group.create_task(_agent(http, admin, turns, kb, tmp))


async def run_variant(label: str, trim_s: float, sim: str, args: argparse.Namespace,
                      tmp: Path) -> Outcome:  # fmt: skip
    port = free_port()
    command = [sys.executable, "-m", "rolltap", "gateway", "--endpoint", sim, "--model", "m",
               "--port", str(port), "--store", f"sqlite:///{tmp / (label + '.db')}"]  # fmt: skip
    env = dict(os.environ, ROLLTAP_TRIM_INTERVAL_S=str(trim_s))
    admin = f"http://127.0.0.1:{port}"
    rest = max(2.5 * args.interval, 2.0)
    out = Outcome(label)
    with running(command, admin + "/health", env=env) as gateway:
        with Sampler(gateway.pid, label) as sampler:
            churn = await measure_churn(
                sampler, lambda: _wave(admin, 1, 2, args.kb, tmp),
                lambda: _wave(admin, args.concurrency, args.turns, args.kb, tmp),
                waves=args.waves, rest=rest, label=label,
            )  # fmt: skip
        out.baseline, out.wave_peaks, out.resting = churn.baseline, churn.wave_peaks, churn.resting
        out.series = sampler.series
    return out


def report(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    print(f"\ngateway RSS, MB: {args.waves} waves × {args.concurrency} rollouts × {args.turns} "
          f"turns, ~{args.kb} KB screenshot a turn; trim every {args.interval:g} s")  # fmt: skip
    print(f"{'variant':<10}{'baseline':>9}{'peak':>7}{'worst rest/base':>16}"
          f"{'trend MB/wave':>14}  resting after each wave")  # fmt: skip
    for o in outcomes:
        worst = max(o.resting) / o.baseline
        waves = " ".join(f"{r:.0f}" for r in o.resting)
        print(f"{o.label:<10}{o.baseline:>9.0f}{max(o.wave_peaks):>7.0f}{worst:>16.2f}"
              f"{slope(o.resting):>14.1f}  {waves}")  # fmt: skip
    best = outcomes[0]
    ok_peak = max(best.wave_peaks) <= GOALS["peak"]
    ok_rest = max(best.resting) / best.baseline <= GOALS["ratio"]
    print(f"\ngoals (trim): peak <= {GOALS['peak']:g}: {'yes' if ok_peak else 'NO'}, "
          f"resting <= {GOALS['ratio']:g} x baseline after every wave: "
          f"{'yes' if ok_rest else 'NO'}")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--turns", type=int, default=45)
    parser.add_argument("--kb", type=int, default=200)
    parser.add_argument("--interval", type=float, default=2.0, help="trim interval, s")
    args = parser.parse_args()
    port = free_port()
    outcomes: list[Outcome] = []
    with (
        rolltap_process(["sim", "--port", str(port)], f"http://127.0.0.1:{port}/health"),
        tempfile.TemporaryDirectory() as tmp,
    ):
        sim = f"http://127.0.0.1:{port}/v1"
        for label, trim_s in (("trim", args.interval), ("no trim", 0.0)):
            outcomes.append(await run_variant(label, trim_s, sim, args, Path(tmp)))
    report(outcomes, args)
    series = [o.series for o in outcomes if o.series is not None]
    plot_series(series, OUT / "gateway_memory.png", "rolltap gateway: RSS, seed 004 churn")


if __name__ == "__main__":
    asyncio.run(main())
