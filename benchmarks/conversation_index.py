"""The conversation index's cost a call, in process: find and remember, as a request event
does them.

    python benchmarks/conversation_index.py [--messages 100,400] [--calls 200]
                                            [--repeat 3] [--baseline-src DIR]

One rollout's agent loop: a history of N messages (shaped as gateway_overhead.py's: a
tool call and a ~170-byte result a turn) sent once, then ``--calls`` calls each a turn
longer, every call looked up and remembered (``ConversationIndex.find`` + ``remember``)
in a process of its own running that code (this checkout's ``src/``; with
``--baseline-src DIR`` another checkout's, the code before a change). Ways: ``relay``, a
relayed call, given the bytes its harness sent (the members its depth check wrote; where
the code takes them); ``translated``, a call without them; ``moving marker``, a
``messages`` loop whose last block carries ``cache_control``, moved every turn as Claude
Code does (its bytes given too). Prints the median µs a call (median and range over the
repeats, runs alternated). Not CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _procs import SRC, baseline_src, loop_sizes

WAYS = ("relay", "translated", "moving marker")

_CHILD = r"""
import inspect, json, statistics, sys, time
import orjson
from rolltap.gateway.conversation import ConversationIndex

way, n, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
filler = "The tool returned rows of observations that the agent keeps in its context. " * 2
marked = way == "moving marker"
dialect = "messages" if marked else "chat"
takes_bytes = "sent" in inspect.signature(ConversationIndex.find).parameters

def turn(i):
    if marked:
        return [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}",
                 "name": "search", "input": {"q": f"q{i}"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                 "content": f"{i:06d} {filler}"}]}]
    return [{"role": "assistant", "content": f"Step {i}.", "tool_calls": [{"id": f"c{i}",
             "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"{i:06d} {filler}"}]

def sent_as(history):
    if not marked:
        return history
    out = [dict(m) for m in history]
    last = dict(out[-1]["content"][-1], cache_control={"type": "ephemeral"})
    out[-1] = dict(out[-1], content=[*out[-1]["content"][:-1], last])
    return out

index = ConversationIndex()
history = [{"role": "user", "content": [{"type": "text", "text": "Find it."}]}
           if marked else {"role": "user", "content": "Find it."}]
for i in range((n - 1) // 2):
    history += turn(i)
took = []
for i in range(calls + 1):
    messages = sent_as(history)
    kwargs = {}
    if takes_bytes and way != "translated":
        kwargs["sent"] = orjson.dumps(messages)  # written by the depth check, before
    t = time.perf_counter()
    index.remember(index.find(messages, dialect=dialect, **kwargs), dialect)
    took.append(time.perf_counter() - t)
    history += turn(100_000 + i)
print(json.dumps(statistics.median(took[1:]) * 1e6))
"""


def _run(src: Path, way: str, n: int, calls: int) -> float:
    env = {"PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, way, str(n), str(calls)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", default="100,400")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-src")
    args = parser.parse_args()
    sizes = loop_sizes(parser, args, 3)
    codes = {"this code": SRC}
    base = baseline_src(parser, args.baseline_src)
    if base is not None:
        codes = {"baseline": base, **codes}
    print("| history | way | " + " | ".join(codes) + " |")
    print("|---|---|" + "---|" * len(codes))
    for n in sizes:
        for way in WAYS:
            runs: dict[str, list[float]] = {name: [] for name in codes}
            for _ in range(args.repeat):
                for name, src in codes.items():
                    runs[name].append(_run(src, way, n, args.calls))
            cells = [
                f"{statistics.median(v):.0f} ({min(v):.0f}–{max(v):.0f})" for v in runs.values()
            ]
            print(f"| {n} messages | {way} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
