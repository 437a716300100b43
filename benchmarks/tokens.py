"""Token-client benchmark: one wave of C two-turn rollouts rendered with Gemma's real tokenizer.

Each wave is ``evaluate``'s machinery (store, gateway, runner; see _tokens_wave.py for why
not ``evaluate`` itself) with the built-in ``chat`` harness (OpenAI SDK), ``r = c = C``,
and an endpoint with ``client="tokens"``, ``completions_api="vllm"`` and the local
model's GGUF vocabulary (``load_gguf_tokenizer(gguf_path())``, built once and cached on
disk), against the simulator's ``/v1/completions`` in its own process. The simulator
only takes ids of its toy vocabulary, so a front in that process folds Gemma's prompt
ids into it (benchmarks/_tokens_upstream.py); its answers are toy ids, which Gemma
decodes to other text, so the second turn cannot line the sampled ids up with the
reply and is rendered in full (``completion_mismatch``): counted, as every render is.

Two renderer-pool arms per C, each wave in a fresh process so its peak RSS is its own
(benchmarks/_tokens_wave.py):

* ``elastic``: the gateway's pool as shipped, in a cold process (the first build also
  imports transformers): multiplex 256, one more renderer per 256 concurrent turns,
  built while the wave waits on it;
* ``fixed``: the same pool grown to 8 renderers before the wave, through the public API
  only (8 × 256 acquirers held until all 8 are built, then released); a wave of C ≤ 2,048
  never loads it past that, so it never grows: 8 renderers, least-loaded placement.

Rollouts start as the runner admits them, like scale.py; the fixed pool is built before
the first is admitted (``prebuild s``, outside the wave). Measured per wave: median
model-call latency (the gateway's clock) by rollout start quartile (q1 = the first
quarter admitted), peak RSS of the wave's process (``ru_maxrss``, its whole life),
renders per second per renderer (renders in the wave / wall / renderers) against one
renderer's capacity rendering back to back; then when the first renderer was ready,
first-turn latency and rollout duration (admission to end) by quartile, renders by kind
(``full``/``extend`` and why) from the request events, and errors.

Then the drift check's cost per turn at 32k-token histories, relative to one orjson parse
of the same ids (goal ≤ 0.5×; benchmarks/_drift_cost.py).

    python benchmarks/tokens.py            # C = 512, 2048; 3 s per call (minutes)
    python benchmarks/tokens.py --quick    # C = 32, 128; 0.5 s per call
    python benchmarks/tokens.py --drift    # the drift check's cost only (seconds)
    python benchmarks/tokens.py --backends # per backend: calls/s, CPU per call (a minute)

``--backends``: the relay, the relay with ``capture_tokens`` and the token client on each
completions API (vllm, llamacpp, vllm-generate, sglang), all against one simulator:
calls/s through the gateway and the gateway's CPU per call, relative to the plain relay in
the same run (benchmarks/_backends.py).
"""

from __future__ import annotations

import argparse
import itertools
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from _backends import measure_backends, print_backends
from _drift_cost import drift_cost, print_drift_cost
from _plots import pyplot, save
from _procs import free_port
from _tokens_upstream import Latency, upstream_process
from _tokens_wave import ARMS, TURNS

from rolltap.local.model import gguf_path
from rolltap.tokens import Renderer, load_gguf_tokenizer

WAVE = Path(__file__).parent / "_tokens_wave.py"
GOAL_Q_RATIO = 1.2
SEED_Q = (6.64, 3.58)  # seed 001: q1, q4 seconds


def _raise_nofile() -> int:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def render_capacity(tokenizer: Path, rounds: int = 1000) -> float:
    """Renders/s of one renderer back to back: the wave's two render shapes, alternating."""
    renderer = Renderer.from_pretrained(tokenizer)
    first = [{"role": "user", "content": "Question 0: how many?"}]
    second = [
        *first,
        {"role": "assistant", "content": "river stone cloud light green quiet north table"},
        {"role": "user", "content": "Question 1: how many?"},
    ]
    sampled = list(range(40, 70))
    t0 = time.perf_counter()
    for _ in range(rounds):
        prompt = renderer.render_conversation(first)
        renderer.render_messages_delta(prompt, sampled, second)
    return 2 * rounds / (time.perf_counter() - t0)


def run_wave(arm: str, c: int, tokenizer: Path, latency: Latency) -> dict[str, Any] | None:
    port = free_port()
    with upstream_process(port, latency), tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "wave.json"
        cmd = [
            sys.executable, str(WAVE), "--arm", arm, "--c", str(c), "--tokenizer", str(tokenizer),
            "--base-url", f"http://127.0.0.1:{port}/v1", "--out", str(out),
        ]  # fmt: skip
        done = subprocess.run(cmd, check=False)
        if done.returncode != 0:
            print(f"{c:>5} {arm:>7} wave failed (exit {done.returncode})", flush=True)
            return None
        row: dict[str, Any] = orjson.loads(out.read_bytes())
    row["ideal_s"] = TURNS * latency.per_call_s
    return row


def _ratio(qs: list[float | None]) -> float | None:
    return qs[0] / qs[3] if qs[0] is not None and qs[3] else None


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _renders(row: dict[str, Any]) -> str:
    counts: dict[str, int] = row["renders"]
    full = sum(n for k, n in counts.items() if k.startswith("full"))
    return f"{full}/{counts.get('extend', 0)}"


HEAD = (
    f"{'C':>5} {'pool':>7} {'rend':>4} {'prebuild s':>10} {'wall s':>6} {'err':>4} "
    f"{'q1 s':>6} {'q2 s':>6} {'q3 s':>6} {'q4 s':>6} {'q1/q4':>5} "
    f"{'peak RSS MB':>11} {'full/ext':>9} {'renders/s/rend':>14}"
)


def _qs(values: list[float | None], scale: float = 1.0) -> str:
    return " ".join(_fmt(None if v is None else v / scale, "6.2f") for v in values)


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['C']:>5} {r['arm']:>7} {r['renderers']:>4} {_fmt(r['prebuild_s'], '10.1f')} "
        f"{r['wall_s']:>6.1f} {r['errors']:>4} {_qs(r['q_latency_ms'], 1000)} "
        f"{_fmt(_ratio(r['q_latency_ms']), '5.2f')} {r['peak_rss_mb']:>11.0f} "
        f"{_renders(r):>9} {r['renders_per_s_per_renderer']:>14.1f}"
    )


def _loop_gap(row: dict[str, Any]) -> float:
    """The longest interval between two of the wave's 0.25 s samples: loop stalls."""
    times = [t for t, _ready, _rss in row["timeline"]]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def _details(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'C':>5} {'pool':>7} {'1st ready s':>11} {'last start s':>12} {'loop gap s':>10} "
        f"{'CPU s':>6}  {'first-turn latency q1..q4 s':<27}  {'rollout duration q1..q4 s':<27}"
    )
    for r in rows:
        print(
            f"{r['C']:>5} {r['arm']:>7} {_fmt(r['first_ready_s'], '11.1f')} "
            f"{r['last_start_s']:>12.2f} {_loop_gap(r):>10.1f} {r['cpu_s']:>6.1f}  "
            f"{_qs(r['q_turn1_ms'], 1000)}  {_qs(r['q_duration_s'])}"
        )
    for r in rows:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["renders"].items()))
        errors = "; ".join(f"{n}× {k}" for k, n in r["error_kinds"].items())
        refused = f"; {r['commit_failures']} incremental commits refused (store busy)"
        print(
            f"  C={r['C']} {r['arm']}: renders {kinds}"
            + (f"; errors {errors}" if errors else "")
            + (refused if r["commit_failures"] else "")
        )


def _goals(rows: list[dict[str, Any]], capacity: float) -> None:
    print(f"\ngoals (seed 001: q1 {SEED_Q[0]} s / q4 {SEED_Q[1]} s = {SEED_Q[0] / SEED_Q[1]:.2f})")
    for c in sorted({r["C"] for r in rows}):
        by_arm = {r["arm"]: r for r in rows if r["C"] == c}
        for arm, r in by_arm.items():
            ratio = _ratio(r["q_latency_ms"])
            met = ratio is not None and ratio <= GOAL_Q_RATIO
            print(f"  C={c} {arm}: q1/q4 {_fmt(ratio, '.2f')} ≤ {GOAL_Q_RATIO}: "
                  + ("met" if met else "MISSED"))  # fmt: skip
        if {"elastic", "fixed"} <= by_arm.keys():
            mine, theirs = by_arm["elastic"]["peak_rss_mb"], by_arm["fixed"]["peak_rss_mb"]
            verdict = "met" if mine < theirs else "MISSED"
            print(f"  C={c} peak RSS elastic {mine:.0f} MB < fixed {theirs:.0f} MB: {verdict}")
    print(f"  renders/s per renderer: see the table; one renderer back to back: {capacity:.0f}/s")


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in rows:
        label = f"{r['arm']} C={r['C']}"
        qs = [None if q is None else q / 1000 for q in r["q_latency_ms"]]
        style = "-" if r["arm"] == "elastic" else "--"
        left.plot(["q1", "q2", "q3", "q4"], qs, style, marker="o", label=label)
        times = [t for t, _ready, _rss in r["timeline"]]
        right.plot(times, [rss for _t, _ready, rss in r["timeline"]], style, label=label)
    left.set_ylim(bottom=0)
    left.set_ylabel("median model-call latency (s)")
    left.set_xlabel("rollouts by start order")
    left.legend()
    right.set_xlabel("seconds since the wave started")
    right.set_ylabel("RSS of the wave's process (MB)")
    right.set_ylim(bottom=0)
    right.legend()
    save(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small C and short latency")
    parser.add_argument("--sizes", type=int, nargs="*", help="C values to run")
    parser.add_argument("--arms", nargs="*", choices=ARMS, default=list(ARMS))
    parser.add_argument("--plot", type=Path, default=Path("benchmarks/out/tokens.png"))
    parser.add_argument("--drift", action="store_true", help="the drift check's cost only")
    parser.add_argument("--backends", action="store_true", help="per backend, against the relay")
    parser.add_argument("--rounds", type=int, default=5, help="--backends: rounds")
    parser.add_argument("--rollouts", type=int, default=64, help="--backends: per round")
    args = parser.parse_args()
    if args.backends:
        turns = 4
        rows = measure_backends(rounds=args.rounds, rollouts=args.rollouts, turns=turns)
        print_backends(rows, calls=args.rollouts * turns, rounds=args.rounds)
        return
    drift = drift_cost()
    if args.drift:
        print_drift_cost(drift)
        return
    if args.quick:
        sizes, latency = [32, 128], Latency(ttft_ms=300, tokens_per_s=100, completion_tokens=20)
    else:
        sizes, latency = [512, 2048], Latency(ttft_ms=1500, tokens_per_s=20, completion_tokens=30)
    print(f"RLIMIT_NOFILE raised to {_raise_nofile()}")
    t0 = time.perf_counter()
    tokenizer = load_gguf_tokenizer(gguf_path())
    print(f"Gemma tokenizer at {tokenizer} ({time.perf_counter() - t0:.1f} s)")
    capacity = render_capacity(tokenizer)
    print(f"one renderer, back to back: {capacity:.0f} renders/s")
    ideal = TURNS * latency.per_call_s
    print(f"{latency.per_call_s:.1f} s per call, {TURNS} turns (ideal {ideal:.1f} s)")
    print(HEAD)
    rows = []
    for c in args.sizes or sizes:
        for arm in args.arms:
            row = run_wave(arm, c, tokenizer, latency)
            if row is not None:
                rows.append(row)
                print(_line(row), flush=True)
    if not rows:
        raise SystemExit("no wave finished")
    print()
    print(HEAD)
    for row in rows:
        print(_line(row))
    _details(rows)
    _goals(rows, capacity)
    print_drift_cost(drift)
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    args.plot.with_suffix(".json").write_bytes(orjson.dumps(rows))
    _plot(rows, args.plot)


if __name__ == "__main__":
    main()
