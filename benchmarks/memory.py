"""Serve worker memory under seed 004's churn, with trim and intercept discard on and off.

One worker per variant (a fresh ``rolltap serve`` service each, in this process), fed
waves of ``--concurrency`` concurrent rollouts of ``--turns`` turns; each turn's request
carries the whole history plus a new ~``--kb`` KB base64 screenshot. The harness is a
subprocess (``benchmarks/_screenshot_agent.py``), so only the worker's own RSS is
sampled (every 0.1 s); the relay client is used, no tokenizer is loaded; the store is
SQLite (the supervisor writes, the worker ships). After a 2-turn warm-up and after
every wave the worker idles for two stats intervals (its trims) and its resting RSS is
read. Prints one row per variant and writes benchmarks/out/memory.png.

    python benchmarks/memory.py                          # 5 waves × 4 × 45 turns × 200 KB
    python benchmarks/memory.py --waves 2 --turns 10     # quick look
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from _procs import free_port, rolltap_process
from _rss import OUT, Sampler, Series, measure_churn, plot_series, slope

from rolltap.config import EndpointConfig
from rolltap.serve import RolloutSpec, ServeClient, ServeConfig, Service

AGENT = Path(__file__).parent / "_screenshot_agent.py"
#: (label, trim, discard intercepts)
VARIANTS = [("trim + discard", True, True), ("no trim", False, True), ("no discard", True, False)]
GOALS = {"peak": 275.0, "resting": 155.0, "ratio": 1.3}


@dataclass
class Outcome:
    label: str
    baseline: float = 0.0
    peak: float = 0.0
    resting: list[float] = field(default_factory=list)
    wave_peaks: list[float] = field(default_factory=list)
    series: Series | None = None


def _spec(turns: int, kb: int, index: int) -> RolloutSpec:
    task = {"id": f"shot{index}", "prompt": "browse", "info": {"turns": turns, "kb": kb}}
    return RolloutSpec(task=task, cmd=f"{sys.executable} {AGENT}", rewards=["contains"])


async def _wave(client: ServeClient, args: argparse.Namespace, turns: int) -> None:
    specs = [_spec(turns, args.kb, i) for i in range(args.concurrency)]
    results = [r async for r in client.submit_batch(specs)]
    bad = [r for r in results if r.status != "completed"]
    if bad:
        raise SystemExit(f"rollouts failed: {[(r.status, r.error) for r in bad]}")


async def run_variant(
    label: str, trim: bool, discard: bool, sim_url: str, args: argparse.Namespace, tmp: Path
) -> Outcome:
    config = ServeConfig(
        workers=1, port=0, token="bench", store=f"sqlite:///{tmp / (label + '.db')}",
        endpoints=[EndpointConfig(base_url=sim_url, model="sim-model")],
        stats_interval_s=args.stats_interval, trim=trim, discard_intercepts=discard,
        max_inflight=args.concurrency,
    )  # fmt: skip
    rest = max(2.5 * args.stats_interval, 2.0)
    out = Outcome(label)
    async with Service(config) as service, ServeClient(service.url, "bench") as client:
        pid = service.supervisor.worker_slots.ready()[0].pid
        assert pid is not None
        with Sampler(pid, label) as sampler:
            one = argparse.Namespace(**{**vars(args), "concurrency": 1})
            churn = await measure_churn(
                sampler, lambda: _wave(client, one, 2), lambda: _wave(client, args, args.turns),
                waves=args.waves, rest=rest, label=label,
            )  # fmt: skip
        out.baseline, out.wave_peaks, out.resting = churn.baseline, churn.wave_peaks, churn.resting
        out.series = sampler.series
    out.peak = max(out.wave_peaks)
    return out


def report(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    shape = f"{args.waves} waves × {args.concurrency} rollouts × {args.turns} turns"
    print(f"\nworker RSS, MB: {shape}, ~{args.kb} KB screenshot a turn; "
          f"stats/trim every {args.stats_interval:g} s")  # fmt: skip
    head = f"{'variant':<16}{'baseline':>9}{'peak':>7}{'resting':>9}{'rest/base':>10}"
    print(head + f"{'trend MB/wave':>14}  resting after each wave")
    for o in outcomes:
        ratio = o.resting[-1] / o.baseline
        waves = " ".join(f"{r:.0f}" for r in o.resting)
        print(f"{o.label:<16}{o.baseline:>9.0f}{o.peak:>7.0f}{o.resting[-1]:>9.0f}{ratio:>10.2f}"
              f"{slope(o.resting):>14.1f}  {waves}")  # fmt: skip
    best = outcomes[0]
    met = {
        f"peak <= {GOALS['peak']:g}": best.peak <= GOALS["peak"],
        f"resting <= {GOALS['resting']:g}": best.resting[-1] <= GOALS["resting"],
        f"resting/baseline <= {GOALS['ratio']:g}": best.resting[-1] / best.baseline
        <= GOALS["ratio"],
        "no upward trend (< 2 MB/wave)": slope(best.resting) < 2.0,
    }
    print(
        f"\ngoals ({best.label}): "
        + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in met.items())
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--turns", type=int, default=45)
    parser.add_argument("--kb", type=int, default=200)
    parser.add_argument("--stats-interval", type=float, default=2.0)
    parser.add_argument("--variants", default=",".join(v[0] for v in VARIANTS))
    args = parser.parse_args()
    chosen = [v for v in VARIANTS if v[0] in args.variants.split(",")]
    port = free_port()
    outcomes: list[Outcome] = []
    sim = rolltap_process(["sim", "--port", str(port)], f"http://127.0.0.1:{port}/health")
    with sim, tempfile.TemporaryDirectory() as tmp:
        for label, trim, discard in chosen:
            outcomes.append(await run_variant(
                label, trim, discard, f"http://127.0.0.1:{port}/v1", args, Path(tmp)
            ))  # fmt: skip
    report(outcomes, args)
    series = [o.series for o in outcomes if o.series is not None]
    plot_series(series, OUT / "memory.png", "rolltap serve: worker RSS, seed 004 churn")


if __name__ == "__main__":
    asyncio.run(main())
