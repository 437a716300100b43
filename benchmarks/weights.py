"""Weight-update benchmark: a trainer updates the weights while ``rolltap serve`` runs rollouts.

A trainer-shaped loop (issue 27) against ``rolltap serve`` (two workers, a SQLite store)
and the simulator as the engine (``rolltap sim``, answers of A tokens at a fixed decode
rate), each in its own process, fresh per run: R callers keep R rollouts in flight
(``ServeClient.submit``, one after another), each rollout T calls of the real OpenAI SDK
in the service's workers (``_weights_harness.loop``), while the trainer updates the
weights every U seconds, each update taking L seconds of "loading" between its pause and
its resume. Four modes, each measured in the same run, 3 repeats interleaved:

* ``none``: no updates; the baseline for rollouts/s and for a call's latency.
* ``stop``: stop-the-world, today. The engine pauses with an abort (SGLang's
  ``/pause_generation {"mode": "abort"}``), loads, takes the new version
  (``/update_weight_version`` with ``abort_all_requests``) and continues; nothing in
  rolltap knows. Emulated with a **relay** endpoint (chat completions): the token client
  continues an engine's abort by itself, and it has no switch to stop it, so "today" is
  what a harness sees through a plain relay: an answer with ``finish_reason: abort`` and
  the text generated so far. The harness counts it as an error, throws its tokens away
  and reruns the call.
* ``hold``: the service pauses with ``hold`` (``POST /pause`` on ``rolltap serve``, every
  worker's gateway; no ``forward_pause``): new calls wait at the gate, calls in flight run
  on; the engine takes the new version (no abort), the service's policy version is set,
  the service resumes.
* ``abort``: abort and continue. The service pauses with ``abort`` and the endpoint's
  ``forward_pause = "sglang"`` (the simulator aborts, answering the ids it had); then the
  engine's version, the policy version, the resume (forwarded: ``/continue_generation``);
  the token client continues each cut completion from prompt + the ids so far, and the
  simulator finishes the answer it began (a continued call decodes A tokens in all).

``hold`` and ``abort`` use a token endpoint (``client = "tokens"``, ``completions_api =
"sglang"``) with the tests' tokenizer over the simulator's own vocabulary (built in
seconds, offline; tests/gateway/simtok.py).

Measured per run, from the harnesses' own timings (an event each rollout leaves in the
store) and the simulator's counters: decoded tokens thrown away per update (the
simulator's ``tokens_generated`` less the completion tokens of the answers the harness
kept; goal 0 with continue), harness-visible errors per update (goal 0), rollouts/s
relative to ``none`` in the same repeat, and the added latency of a call that overlapped
an update: its time less the median call of the ``none`` run in the same repeat (every
call decodes A tokens), less the time the update held it (inside its window, but no longer
than the gateway's ``waited_ms`` for the call), per update it met ("added − update"; goal
≤ 50 ms), apart for the calls that began while paused (held at the gate; in ``stop``, by
the engine) and those in flight when an update began, and split from each call's
``model_response`` timing into rolltap's part and the engine's (``upstream_ms``). In
flight, through ``stop`` the thrown-away partial and the rerun show there; through
``abort`` the continuation's time to its first token (the engine's re-prefill,
``ttft_ms``); through ``hold`` calls run on, and what shows is the engine's pace around
an update. Ranges are over the 3 repeats.

    python benchmarks/weights.py            # 2,000-token answers at 100 tok/s, update every 20 s
    python benchmarks/weights.py --quick    # 200 tokens at 400 tok/s, every 3 s, 30 s runs
    python benchmarks/weights.py --summarize benchmarks/out/weights.json  # the table again
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from _plots import pyplot, save
from _weights_run import MODES, Profile, Run, run_once

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from gateway.simtok import build_sim_tokenizer

GOAL_EXCESS_MS = 50.0
#: every run's calls and windows, wherever the PNG goes (``--summarize`` reads it back)
OUT = Path("benchmarks/out/weights.json")
FULL = Profile(answer_tokens=2000, tokens_per_s=100, ttft_ms=50, every_s=20, load_s=2.0,
               run_s=120, rollouts=16, turns=2)  # fmt: skip
QUICK = Profile(answer_tokens=200, tokens_per_s=400, ttft_ms=20, every_s=3, load_s=0.5,
                run_s=30, rollouts=8, turns=2)  # fmt: skip


def _overlaps(call: tuple[float, float, int], windows: list[tuple[float, float]]) -> list[float]:
    """The time ``call`` spent inside each update window it met (seconds)."""
    t0, t1, _ = call
    return [min(b, t1) - max(a, t0) for a, b in windows if a < t1 and b > t0]


@dataclass(frozen=True, slots=True)
class Base:
    """The ``none`` run's median call, in all and in the gateway's parts (ms)."""

    call_ms: float
    #: ``waited_ms + gateway_ms``: rolltap's own part of a call
    own_ms: float
    upstream_ms: float

    @classmethod
    def of(cls, run: Run) -> Base:
        timings = [t for t in run.timings if t is not None]
        return cls(
            call_ms=latency(run) * 1000,
            own_ms=statistics.median(t["waited_ms"] + t["gateway_ms"] for t in timings),
            upstream_ms=statistics.median(t["upstream_ms"] for t in timings),
        )


def latency(run: Run) -> float:
    """The run's median call (seconds)."""
    return statistics.median(b - a for a, b, _ in run.calls)


@dataclass
class Touched:
    """Added − update (ms) of the calls an update touched, in all and in parts."""

    total: list[float] = field(default_factory=list)
    #: rolltap's part: its waits at the gate and its own time, less the windows'
    own: list[float] = field(default_factory=list)
    #: the engine's: its time on the call, less the ``none`` run's median
    engine: list[float] = field(default_factory=list)


def _split(run: Run, base: Base) -> tuple[Touched, Touched]:
    """Added − update (ms) of the calls an update touched, per update each met: those that
    began while paused (held at the gate, or by the engine in ``stop``), and those in
    flight when an update began (run on in ``hold``, cut and continued in ``abort``,
    aborted and rerun in ``stop``). A call's excess is its time less the ``none`` run's
    median call less the time the updates held it, shared among the updates it met (with
    20-second answers and an update every 20 seconds a call often meets two). The time
    held: its time inside update windows, but no more than it waited at the gate where its
    timing is known (``waited_ms``: a call that ran on through an update was not held; a
    late release is added latency). With the timing, its parts: rolltap's (``waited_ms +
    gateway_ms``) and the engine's (``upstream_ms``), each against the ``none`` run's
    median."""
    held, flight = Touched(), Touched()
    for call, timing in zip(run.calls, run.timings, strict=True):
        if not (hit := _overlaps(call, run.windows)):
            continue
        t0, t1, _ = call
        n = len(hit)
        inside = sum(hit) * 1000
        if timing is not None:  # held no longer than it waited at the gate
            inside = min(inside, timing["waited_ms"])
        group = held if any(a <= t0 < b for a, b in run.windows) else flight
        group.total.append(((t1 - t0) * 1000 - base.call_ms - inside) / n)
        if timing is not None:
            own = timing["waited_ms"] + timing["gateway_ms"]
            group.own.append((own - base.own_ms - inside) / n)
            group.engine.append((timing["upstream_ms"] - base.upstream_ms) / n)
    return held, flight


def _p50_max(values: list[float]) -> tuple[float | None, float | None]:
    return (statistics.median(values), max(values)) if values else (None, None)


def summarize(run: Run, base: Base) -> dict[str, Any]:
    """One run's numbers (see the module's docstring); ``base``: the ``none`` run's in the
    same repeat."""
    updates = len(run.windows)
    per = max(updates, 1)
    held, flight = _split(run, base)
    generated = int(run.sim["tokens_generated"])
    parts: dict[str, Any] = {}
    for name, group in (("held", held), ("flight", flight)):
        parts[f"{name}_calls"] = len(group.total)
        for part, values in (("ms", group.total), ("own_ms", group.own),
                             ("engine_ms", group.engine)):  # fmt: skip
            parts[f"{name}_{part}_p50"], parts[f"{name}_{part}_max"] = _p50_max(values)
    return {
        "mode": run.mode, "updates": updates, "calls": len(run.calls),
        "thrown_per_update": (generated - run.kept) / per if updates else generated - run.kept,
        "errors_per_update": len(run.errors) / per if updates else len(run.errors),
        "rollouts_per_s": run.rollouts / run.wall_s, "kept_per_s": run.kept / run.wall_s,
        "window_ms": statistics.median([(b - a) * 1000 for a, b in run.windows])
        if run.windows else None,
        "call_ms_p50": latency(run) * 1000, **parts,
        "engine_aborted": run.sim["aborted"], "discarded_seen": run.discarded,
        "error_kinds": sorted(set(run.errors)),
    }  # fmt: skip


def _range(values: Sequence[float | None], spec: str) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    lo, hi = format(min(vals), spec), format(max(vals), spec)
    return lo if lo == hi else f"{lo}–{hi}"


HEAD = (
    "| mode | updates | tokens thrown away / update | errors / update | rollouts/s "
    "| vs none | kept tokens/s vs none | update (pause→resume) ms "
    "| held at the gate: calls, added − update ms: p50, max (rolltap's part, the engine's: max) "
    "| in flight at an update: the same |"
)


def table(rows: list[dict[str, Any]]) -> str:
    base = {r["repeat"]: r for r in rows if r["mode"] == "none"}
    lines = [HEAD, "|---|---|---|---|---|---|---|---|---|---|"]
    for mode in MODES:
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        lines.append(_row(mode, rs, [(r, base[r["repeat"]]) for r in rs if r["repeat"] in base]))
    return "\n".join(lines)


def _row(mode: str, rs: list[dict[str, Any]], pairs: list[tuple[dict[str, Any], Any]]) -> str:
    def col(key: str, spec: str) -> str:
        return _range([r[key] for r in rs], spec)

    def vs(key: str) -> str:
        return _range([r[key] / b[key] for r, b in pairs], ".2f")

    def group(name: str) -> str:
        parts = f" ({col(name + '_own_ms_max', '.0f')}, {col(name + '_engine_ms_max', '.0f')})"
        known = any(r[name + "_own_ms_max"] is not None for r in rs)
        return (f"{col(name + '_calls', 'd')}: {col(name + '_ms_p50', '.0f')}, "
                f"{col(name + '_ms_max', '.0f')}{parts if known else ''}")  # fmt: skip

    return (
        f"| {mode} | {col('updates', 'd')} | {col('thrown_per_update', '.0f')} "
        f"| {col('errors_per_update', '.2f')} | {col('rollouts_per_s', '.2f')} "
        f"| {vs('rollouts_per_s')} | {vs('kept_per_s')} | {col('window_ms', '.0f')} "
        f"| {group('held')} | {group('flight')} |"
    )


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def goals(rows: list[dict[str, Any]], prof: Profile) -> None:
    for mode in ("hold", "abort"):
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        thrown = max(r["thrown_per_update"] for r in rs)
        errors = max(r["errors_per_update"] for r in rs)
        print(f"  {mode}: thrown away/update {thrown:.0f} = 0: {_verdict(thrown == 0)}; "
              f"errors/update {errors:.2f} = 0: {_verdict(errors == 0)}")  # fmt: skip
        for group, what in (("held", "held at the gate"), ("flight", "in flight, then")):
            seen = [r for r in rs if r[f"{group}_ms_max"] is not None]
            if not seen:
                print(f"    no call was {what}")
                continue
            worst = max(r[f"{group}_ms_max"] for r in seen)
            print(f"    a call {what}: added latency − update ≤ {GOAL_EXCESS_MS:.0f} ms "
                  f"(max {worst:.0f}): {_verdict(worst <= GOAL_EXCESS_MS)}")  # fmt: skip
            own = [r[f"{group}_own_ms_max"] for r in seen if r[f"{group}_own_ms_max"] is not None]
            engine = [r[f"{group}_engine_ms_max"] for r in seen if own]
            if own:
                print(f"      of it, rolltap's part (waits at the gate + its own time − "
                      f"update): max {max(own):.0f} ms; the engine's (its time on the call − "
                      f"none's): max {max(engine):.0f} ms"
                      + (f", of which its re-prefill after a cut: {prof.ttft_ms:.0f} ms"
                         if mode == "abort" and group == "flight" else ""))  # fmt: skip


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    modes = [m for m in MODES if m != "none" and any(r["mode"] == m for r in rows)]
    keys = [("thrown_per_update", "decoded tokens thrown away / update"),
            ("errors_per_update", "harness-visible errors / update"),
            ("held_ms_max", "held at the gate: added − update (ms, max)"),
            ("flight_ms_max", "in flight: added − update (ms, max)")]  # fmt: skip
    # no panel for a group no call fell in (long answers: every call is in flight)
    keys = [(k, label) for k, label in keys if any(r[k] is not None for r in rows)]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.8 * len(keys), 3.6))
    for ax, (key, label) in zip(axes, keys, strict=True):
        vals = [[r[key] or 0.0 for r in rows if r["mode"] == m] for m in modes]
        mids = [statistics.median(v) for v in vals]
        err = [[m - min(v) for m, v in zip(mids, vals, strict=True)],
               [max(v) - m for m, v in zip(mids, vals, strict=True)]]  # fmt: skip
        ax.bar(modes, mids, yerr=err, capsize=4, color=["#c44", "#48c", "#4a4"][: len(modes)])
        ax.set_title(label, fontsize=9)
        if key.endswith("_ms_max"):  # seconds lost to stop-the-world, ms to the others
            ax.set_yscale("symlog", linthresh=100)
            ax.axhline(GOAL_EXCESS_MS, color="k", linestyle="--", linewidth=0.8)
    save(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short answers, short runs")
    parser.add_argument("--modes", nargs="*", choices=MODES, default=list(MODES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--answer-tokens", type=int, help="A: tokens per answer")
    parser.add_argument("--tokens-per-s", type=float, help="the decode rate per answer")
    parser.add_argument("--every", type=float, help="U: seconds between updates")
    parser.add_argument("--load", type=float, help="L: seconds an update loads (paused)")
    parser.add_argument("--seconds", type=float, help="how long rollouts start, per run")
    parser.add_argument("--rollouts", type=int, help="R: concurrent harness loops")
    parser.add_argument("--turns", type=int, help="T: calls per rollout")
    parser.add_argument("--plot", type=Path, default=Path("benchmarks/out/weights.png"))
    parser.add_argument("--summarize", type=Path, metavar="JSON",
                        help=f"no runs: summarize the runs a run left in {OUT}")  # fmt: skip
    args = parser.parse_args()
    if args.summarize is not None:  # the table again from a run's numbers
        try:
            dump = orjson.loads(args.summarize.read_bytes())
            prof, done = Profile(**dump["profile"]), [_run_of(r) for r in dump["runs"]]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            parser.error(f"--summarize {args.summarize}: not a run's numbers ({exc!r})")
        report(prof, done, args.plot)
        return
    prof = QUICK if args.quick else FULL
    overrides = {"answer_tokens": args.answer_tokens, "tokens_per_s": args.tokens_per_s,
                 "every_s": args.every, "load_s": args.load, "run_s": args.seconds,
                 "rollouts": args.rollouts, "turns": args.turns}  # fmt: skip
    prof = Profile(**{**asdict(prof), **{k: v for k, v in overrides.items() if v is not None}})
    print(prof)
    runs: list[tuple[int, Run]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        tokenizer = build_sim_tokenizer(folder / "tok")
        modes = ["none", *(m for m in args.modes if m != "none")]  # the baseline first
        for repeat in range(args.repeats):
            for mode in modes:
                t0 = time.perf_counter()
                runs.append((repeat, run_once(mode, tokenizer, prof, folder)))
                print(f"repeat {repeat} {mode}: {time.perf_counter() - t0:.0f} s", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    kept = [{"repeat": i, **asdict(r)} for i, r in runs]
    OUT.write_bytes(orjson.dumps({"profile": asdict(prof), "runs": kept}))
    report(prof, runs, args.plot)


def _run_of(data: dict[str, Any]) -> tuple[int, Run]:
    fields = {k: v for k, v in data.items() if k != "repeat"}
    run = Run(**fields)
    run.windows = [(a, b) for a, b in run.windows]
    run.calls = [(a, b, n) for a, b, n in run.calls]
    return data["repeat"], run


def report(prof: Profile, runs: list[tuple[int, Run]], plot_to: Path) -> None:
    """Every run summarized against the ``none`` run of its repeat: the table, the goals,
    the PNG."""
    base = {i: Base.of(r) for i, r in runs if r.mode == "none"}
    rows = [{"repeat": i, **summarize(r, base[i])} for i, r in runs]
    for row in rows:
        print(row)
    print()
    print(table(rows))
    print("\ngoals")
    goals(rows, prof)
    plot(rows, plot_to)


if __name__ == "__main__":
    main()
