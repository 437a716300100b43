"""Peak RSS of ``rolltap sessions export --format hf`` against the run's size.

Builds SQLite stores of N synthetic rollouts each (``--turns`` token-client turns of a
growing conversation: every prompt extends the last, ``--ids`` new prompt ids and as many
sampled ids per turn, tool calls and results in the messages), then exports each with the
real CLI in a child process and reads that child's peak RSS (``ru_maxrss``). Constant
memory means the peak does not grow with N; holding the run would add about its Arrow
size (printed) to the peak.

    python benchmarks/hf_export.py                      # 1,000 and 10,000 rollouts
    python benchmarks/hf_export.py --sizes 200 2000     # quick look
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _rss import MB

from rolltap.events import EventLog
from rolltap.store import Store


def _log(turns: int, ids: int, n: int) -> EventLog:
    log = EventLog()
    log.append("status", {"status": "running"})
    prompt: list[int] = []
    for turn in range(turns):
        prompt = prompt + list(range(n % 1000, n % 1000 + ids))
        completion = list(range(turn, turn + ids))
        messages = [{"role": "user", "content": f"rollout {n} turn {turn} " + "x" * 200}]
        log.append("model_request", {"intercept_id": f"i{turn}", "dialect": "chat",
                                     "messages": messages, "params": {"model": "m"}})  # fmt: skip
        function = {"name": "calculator", "arguments": '{"expression": "6*7"}'}
        call = {"id": f"c{turn}", "type": "function", "function": function}
        log.append("model_response", {
            "intercept_id": f"i{turn}", "status": 200,
            "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": ids},
            "timing": {"ttfc_ms": 5.0, "total_ms": 9.0},
            "tokens": {"prompt_ids": prompt, "completion_ids": completion,
                       "completion_logprobs": [-0.5] * ids,
                       "render": "extend" if turn else "full"},
        })  # fmt: skip
        prompt = prompt + completion
    log.append("reward", {"reward": 1.0, "exact": 1.0})
    log.append("status", {"status": "completed", "error": None, "limit": None, "answer": "42"})
    return log


async def _populate(url: str, size: int, turns: int, ids: int) -> None:
    async with await Store.open(url) as store:
        run = await store.create_run(f"bench-{size}")
        for n in range(size):
            info = await store.create_session(run.id, task={"task_id": str(n), "sample": 0})
            await store.commit(info.id, _log(turns, ids, n), status="completed", reward=1.0)


def _export(url: str, out: Path) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one CLI export in a child process."""
    code = (
        "import resource, sys; from rolltap.cli.main import main\n"
        "try:\n    main()\nfinally:\n"
        "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), HF_HUB_OFFLINE="1")
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, "sessions", "export", "--format", "hf",
         "--store", url, "-o", str(out)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode:
        sys.exit(done.stderr)
    return int(done.stderr.strip().splitlines()[-1]) * 1024 / MB, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--ids", type=int, default=64)
    args = parser.parse_args()
    print(f"{'rollouts':>9} {'store MB':>9} {'dataset MB':>11} {'peak RSS MB':>12} {'s':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            url = f"sqlite:///{tmp}/bench-{size}.db"
            asyncio.run(_populate(url, size, args.turns, args.ids))
            out = Path(tmp) / f"out-{size}"
            peak, seconds = _export(url, out)
            data = sum(f.stat().st_size for f in out.glob("*.arrow")) / MB
            db = Path(f"{tmp}/bench-{size}.db").stat().st_size / MB
            print(f"{size:>9} {db:>9.1f} {data:>11.1f} {peak:>12.1f} {seconds:>6.1f}")


if __name__ == "__main__":
    main()
