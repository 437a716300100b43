"""Where a model call's CPU goes in one ``rolltap eval`` process, sampled by py-spy.

One wave of ``-c`` 3-turn ``chat`` rollouts (the built-in harness: OpenAI-SDK coroutines in
the eval's process) through the gateway to ``rolltap sim`` in its own process (as
benchmarks/scale.py, shorter calls), stored in SQLite, the eval run as a CLI process with
``--workers 0`` under ``py-spy record --gil``: only samples of a thread holding the GIL,
i.e. Python's own work (py-spy's idle test counts a thread blocked in a queue or in the
event loop's poll as busy; work in C without the GIL — SQLite's, the kernel's — is left out
and shows as the gap to the process's CPU, printed beside). Each sample is put in one part
by the frames on its stack, the first rule that matches from the top:

- harness SDK: the ``openai`` / ``httpx2`` / ``httpcore2`` / ``anyio`` client side;
- gateway: rolltap's gateway, dialects and clients, aiohttp's server and client;
- store: rolltap's store (writer thread and commits), SQLAlchemy, sqlite3;
- rollouts: the runner, recorder, results and summaries (rolltap.rollouts / results);
- event loop: uvloop/asyncio themselves (scheduling, sockets), and the rest.

    python benchmarks/cpu_split.py              # -c 512 (needs py-spy: the bench extra)
    python benchmarks/cpu_split.py -c 128 --rate 200
    python benchmarks/cpu_split.py -c 2048 --workers 2   # the driver and its workers apart

With ``--workers N`` py-spy follows the eval's worker processes too (``--subprocesses``)
and the table has one column per kind of process.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import orjson
from _procs import free_port, rolltap_process

_GATEWAY = ("rolltap/gateway/", "rolltap/dialects/", "rolltap/clients/", "rolltap/http/",
            "rolltap/pool/", "aiohttp/")  # fmt: skip
#: (part, markers in a frame's text), first match over the whole stack wins
RULES: list[tuple[str, tuple[str, ...]]] = [
    ("store", ("rolltap/store/", "sqlalchemy/", "sqlite3/", "aiosqlite/")),
    ("harness SDK", ("openai/", "httpx2/", "httpcore2/", "anyio/", "h11/", "sniffio/")),
    ("gateway", _GATEWAY),
    ("rollouts", ("rolltap/rollouts/", "rolltap/results/", "rolltap/events/")),
]
PARTS = [part for part, _ in RULES] + ["event loop, other"]


def part_of(stack: str) -> str:
    for part, markers in RULES:
        if any(marker in stack for marker in markers):
            return part
    return PARTS[-1]


def process_of(stack: str) -> str:
    """``workers`` for a sample of a worker process, else ``eval`` (py-spy names the
    process, and the parent it was started from, as frames of their own)."""
    names = [frame for frame in stack.split(";") if frame.startswith("process ")]
    return "workers" if names and "rolltap.serve.worker" in names[-1] else "eval"


def split(collapsed: Path) -> Counter[tuple[str, str]]:
    """Samples per (process, part) from py-spy's ``--format raw`` (collapsed stacks)."""
    counts: Counter[tuple[str, str]] = Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            counts[(process_of(stack), part_of(stack))] += int(n)
    return counts


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", type=int, default=512, help="rollouts (one wave, all at once)")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples a second")
    parser.add_argument("--stacks", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--workers", default="0", help="the eval's --workers (0: one process)")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed (pip install -e '.[bench]')")
    port = free_port()
    sim = ["sim", "--port", str(port), "--ttft-ms", "1000", "--tokens-per-s", "50",
           "--completion-tokens", "50"]  # fmt: skip
    with (
        rolltap_process(sim, f"http://127.0.0.1:{port}/health"),
        tempfile.TemporaryDirectory() as tmp,
    ):
        tasks = Path(tmp) / "tasks.jsonl"
        messages = [{"role": "user", "content": f"q{i}"} for i in range(3)]
        tasks.write_bytes(orjson.dumps({"id": "t", "messages": messages, "info": {"regex": "."}}))
        out = Path(tmp) / "stacks.txt"
        command = [
            spy, "record", "--gil", "--subprocesses", "--rate", str(args.rate), "--format", "raw",
            "--output", str(out), "--",
            sys.executable, "-m", "rolltap", "eval", str(tasks), "--harness", "chat",
            "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "sim", "-r", str(args.c),
            "-c", str(args.c), "--workers", args.workers, "--reward", "regex", "--json",
            "--store", f"sqlite:///{tmp}/cpu.db",
        ]  # fmt: skip
        started, before = time.monotonic(), _children_cpu()
        done = subprocess.run(command, capture_output=True, check=False)
        wall, cpu = time.monotonic() - started, _children_cpu() - before
        if done.returncode != 0:
            print(done.stderr.decode()[-2000:], file=sys.stderr)
            return 1
        # the summary, between py-spy's own lines
        text = done.stdout.decode()
        summary, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
        counts = split(out)
        if args.stacks is not None:
            shutil.copyfile(out, args.stacks)
    calls, total = summary["model_calls"], sum(counts.values())
    ms_a_call = 1000.0 * total / args.rate / max(calls, 1)
    print(f"\n-c {args.c}: {calls} model calls, {wall:.0f} s; {total} samples holding the GIL at "
          f"{args.rate}/s = {ms_a_call:.2f} ms a call; the process's CPU (py-spy's "
          f"included) {1000 * cpu / max(calls, 1):.2f} ms a call")  # fmt: skip
    processes = ["eval"] + (["workers"] if args.workers != "0" else [])
    print(f"{'part':<20}{'share':>7}{'ms a call':>11}" + "".join(f"{p:>10}" for p in processes))
    for part in PARTS:
        n = sum(counts[(p, part)] for p in processes)
        share = n / max(total, 1)
        apart = "".join(
            f"{ms_a_call * counts[(p, part)] / max(total, 1):>10.2f}" for p in processes
        )
        print(f"{part:<20}{share:>7.0%}{share * ms_a_call:>11.2f}{apart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
