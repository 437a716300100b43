"""Huge contexts through a standalone ``rolltap gateway``: peak RSS against the bytes in flight.

``--rollouts`` chat rollouts (default 256) of ``--turns`` turns (20) each resend their whole
history, which grows by an equal share each turn to ~``--tokens`` tokens (100k: ~400 KB of
text at 4 characters a token) at the last, as a long-running agent's does. The load comes
from this process (raw HTTP over aiohttp, one connection a rollout, registered over the
admin API) so that only the gateway's own RSS is sampled; the gateway stores every event in
SQLite, in front of ``rolltap sim``. A second thread samples, together, the gateway's RSS and
the bytes of the request bodies in flight (sent, answer not yet read whole).

The goal (issue 28): peak RSS ≤ its baseline (after a warm-up, before the load) + 2 × the
peak bytes in flight; no error; every event stored (a request and a response per call, read
back from the database once the gateway is gone).

    python benchmarks/big_context.py                              # 256 × 20 turns → 100k tokens
    python benchmarks/big_context.py --rollouts 32 --turns 6      # quick look
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import psutil
from _procs import free_port, rolltap_process, running

GOAL_RATIO = 2.0
#: rollouts × turns before the load (stored too)
WARM_UP = (4, 2)
HEADERS = {"Authorization": "Bearer bench"}
MB = 1024 * 1024
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda")


@dataclass
class Load:
    """What the load generator has in flight now, and what it saw."""

    in_flight: int = 0
    calls: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class Samples:
    t: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)


def _sample(proc: psutil.Process, load: Load, out: Samples, stop: threading.Event) -> None:
    t0 = time.monotonic()
    while not stop.is_set():
        try:
            rss = proc.memory_info().rss
        except psutil.NoSuchProcess:
            return
        out.t.append(time.monotonic() - t0)
        out.rss.append(rss)
        out.in_flight.append(load.in_flight)
        stop.wait(0.05)


def _text(chars: int, rng: random.Random) -> str:
    words: list[str] = []
    n = 0
    while n < chars:
        word = rng.choice(_WORDS) + str(rng.randrange(1000))
        words.append(word)
        n += len(word) + 1
    return " ".join(words)


async def _rollout(http: aiohttp.ClientSession, admin: str, load: Load, turns: int,
                   chars_a_turn: int, seed: int) -> None:  # fmt: skip
    async with http.post(admin + "/rollouts", json={}, headers=HEADERS) as resp:
        rollout = await resp.json()
    url = rollout["openai_base_url"] + "/chat/completions"
    auth = {"Authorization": "Bearer " + rollout["api_key"], "Content-Type": "application/json"}
    rng = random.Random(seed)
    messages: list[dict[str, str]] = [{"role": "system", "content": "You read long logs."}]
    async with aiohttp.ClientSession() as own:  # one connection a rollout, as an agent has
        for turn in range(turns):
            text = f"part {turn}: " + _text(chars_a_turn, rng)
            messages.append({"role": "user", "content": text})
            body = orjson.dumps({"model": "m", "messages": messages, "max_tokens": 8})
            load.in_flight += len(body)
            try:
                async with own.post(url, data=body, headers=auth) as resp:
                    data = await resp.read()
                    if resp.status != 200:
                        load.errors.append(f"turn {turn}: HTTP {resp.status}: {data[:200]!r}")
                        return
            finally:
                load.in_flight -= len(body)
            load.calls += 1
            reply = orjson.loads(data)["choices"][0]["message"]["content"] or ""
            messages.append({"role": "assistant", "content": reply})
    async with http.delete(f"{admin}/rollouts/{rollout['id']}", headers=HEADERS) as resp:
        if resp.status != 200:
            load.errors.append(f"ending {rollout['id']}: HTTP {resp.status}")


async def _wave(admin: str, load: Load, n: int, turns: int, chars: int) -> None:
    async with aiohttp.ClientSession() as http, asyncio.TaskGroup() as group:
        for i in range(n):
            group.create_task(_rollout(http, admin, load, turns, chars, seed=i))


def _stored(db: Path) -> dict[str, int]:
    """Events stored by kind, and ``bytes``: their payloads' size in all."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT kind, COUNT(*), SUM(LENGTH(payload)) FROM rolltap_events GROUP BY kind"
        ).fetchall()
    return {kind: count for kind, count, _ in rows} | {"bytes": sum(n for *_, n in rows)}


async def run(args: argparse.Namespace, sim: str, tmp: Path) -> bool:
    port, db = free_port(), Path(args.db) if args.db else tmp / "big.db"
    admin = f"http://127.0.0.1:{port}"
    gateway_args = ["gateway", "--endpoint", sim, "--model", "m", "--port", str(port),
                    "--store", f"sqlite:///{db}"]  # fmt: skip
    chars = args.tokens * 4 // args.turns
    load, samples, stop = Load(), Samples(), threading.Event()
    # stderr not piped: nothing reads it while the load runs
    with running([sys.executable, "-m", "rolltap", *gateway_args], admin + "/health") as gateway:
        await _wave(admin, Load(), *WARM_UP, 1000)  # imports, first connections
        await asyncio.sleep(1.0)
        baseline = gateway.memory_info().rss
        sampler = threading.Thread(target=_sample, args=(gateway, load, samples, stop))
        sampler.start()
        started = time.monotonic()
        try:
            await _wave(admin, load, args.rollouts, args.turns, chars)
        finally:
            stop.set()
            sampler.join()
        wall = time.monotonic() - started
        cpu = sum(gateway.cpu_times()[:2])
    stored = _stored(db)
    return report(args, load, samples, baseline, stored, wall, cpu)


def report(args: argparse.Namespace, load: Load, samples: Samples, baseline: int,
           stored: dict[str, int], wall: float, cpu: float) -> bool:  # fmt: skip
    calls = args.rollouts * args.turns
    warm = WARM_UP[0] * WARM_UP[1]
    peak_rss, peak_flight = max(samples.rss), max(samples.in_flight)
    ratio = (peak_rss - baseline) / peak_flight if peak_flight else float("inf")
    at_peak = samples.in_flight[samples.rss.index(peak_rss)]
    last_body = args.tokens * 4 / 1024
    print(f"\n{args.rollouts} rollouts × {args.turns} turns, histories growing to ~{args.tokens:,}"
          f" tokens (~{last_body:.0f} KB a body); gateway on SQLite, {wall:.0f} s, "
          f"{cpu / max(load.calls, 1) * 1000:.1f} ms gateway CPU a call")  # fmt: skip
    print(
        f"{'baseline MB':>12}{'peak RSS MB':>12}{'peak in flight MB':>18}"
        f"{'in flight at peak RSS':>22}{'(peak-base)/in flight':>23}{'events stored MB':>17}"
    )
    print(f"{baseline / MB:>12.0f}{peak_rss / MB:>12.0f}{peak_flight / MB:>18.0f}"
          f"{at_peak / MB:>22.0f}{ratio:>23.2f}{stored['bytes'] / MB:>17.0f}")  # fmt: skip
    requests = stored.get("model_request", 0) - warm
    responses = stored.get("model_response", 0) - warm
    print(f"calls answered {load.calls}/{calls}, errors {len(load.errors)}, stored "
          f"requests {requests}, responses {responses}")  # fmt: skip
    for line in load.errors[:5]:
        print("  " + line)
    ok_memory = ratio <= GOAL_RATIO
    ok_events = requests == responses == calls and not load.errors
    print(f"goals: peak RSS <= baseline + {GOAL_RATIO:g} × bytes in flight: "
          f"{'yes' if ok_memory else 'NO'}; no error, every event stored: "
          f"{'yes' if ok_events else 'NO'}")  # fmt: skip
    return ok_memory and ok_events


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=100_000, help="history at the last turn")
    parser.add_argument("--db", help="keep the SQLite store here (default: a temporary one)")
    args = parser.parse_args()
    port = free_port()
    with (
        rolltap_process(["sim", "--port", str(port)], f"http://127.0.0.1:{port}/health"),
        tempfile.TemporaryDirectory() as tmp,
    ):
        ok = await run(args, f"http://127.0.0.1:{port}/v1", Path(tmp))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
