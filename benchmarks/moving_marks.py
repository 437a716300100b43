"""A Claude Code-shaped loop: what the gateway stores and spends a call when the agent moves
its prompt-caching marker and resends its tool schemas every turn.

    python benchmarks/moving_marks.py [--turns 200] [--repeat 3] [--tools-kb 64]
                                      [--baseline-src DIR]

One rollout of an Anthropic ``messages`` conversation growing a turn at a time (an
assistant ``tool_use`` block, then a ``tool_result`` of ~1 KB), beside the same tool
schemas (``--tools-kb``, Claude Code's 64 KB by default) and a 6 KB system prompt on every
call, as Claude Code sends them, called at c = 1 through
``rolltap gateway --dialect messages`` (a relay) in front of the simulator. Shape
``moving``: the last block sent carries ``cache_control`` and the block marked last turn is
sent again without it, as Claude Code does; shape ``unmarked``: no markers (an SDK user
without prompt caching), what the marker handling costs a body that has none. For each
shape and code (this checkout's ``src/``; with ``--baseline-src DIR`` another checkout's,
the code before a change) a fresh gateway runs the loop; printed: the gateway's CPU per
call (median and range over the repeats, runs alternated) and the request events' JSON
bytes per call (what the store is sent), and the history's size at the last turn. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from _procs import SRC, baseline_src, cpu_seconds, free_port, rolltap_process, simulator

_ADMIN = {"Authorization": "Bearer bench"}
_OUTPUT = "row of output the tool printed for the agent to read, " * 18
_SYSTEM = "You are an agent working in a repository; follow the instructions. " * 90


def tools(kbytes: int) -> list[dict[str, Any]]:
    """Tool schemas of about ``kbytes`` KB of JSON (~2 KB a tool)."""
    doc = "What the tool does, when to use it and when not to. " * 36
    return [{"name": f"Tool{i}", "description": doc,
             "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}}
            for i in range(max(0, kbytes // 2))]  # fmt: skip


def conversation(turns: int, *, marked: bool) -> list[dict[str, Any]]:
    """The task and ``turns`` tool round trips; the last block marked when ``marked``."""
    out: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}
    ]
    for i in range(turns):
        call = {"type": "tool_use", "id": f"toolu_{i:05d}", "name": "Bash",
                "input": {"command": f"pytest -x tests/test_{i}.py"}}  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:05d}",
                  "content": f"{i:05d} {_OUTPUT}"}  # fmt: skip
        out += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    if marked:
        out[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


async def _loop(admin: str, turns: int, marked: bool, schemas: list[Any]) -> tuple[int, int]:
    """One rollout through ``turns`` calls; (request-event JSON bytes, last body bytes)."""
    async with aiohttp.ClientSession() as http:
        async with http.post(admin + "/rollouts", headers=_ADMIN) as resp:
            rollout = await resp.json()
        url = rollout["anthropic_base_url"] + "/v1/messages"
        headers = {"x-api-key": rollout["api_key"], "anthropic-version": "2023-06-01"}
        size = 0
        for turn in range(turns):
            body = {"model": "claude", "max_tokens": 16, "system": _SYSTEM,
                    "messages": conversation(turn, marked=marked), "tools": schemas}  # fmt: skip
            data = orjson.dumps(body)
            size = len(data)
            async with http.post(url, data=data, headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}: {await resp.text()}")
        async with http.get(f"{admin}/rollouts/{rollout['id']}/events", headers=_ADMIN) as resp:
            events = (await resp.json())["events"]
    stored = sum(len(orjson.dumps(e["payload"])) for e in events if e["kind"] == "model_request")
    return stored, size


def measure(
    src: Path, sim: str, turns: int, marked: bool, schemas: list[Any]
) -> tuple[float, float, int]:
    """(CPU µs per call, request-event bytes per call, the last body's bytes) of one
    fresh gateway running ``src``'s code."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["gateway", "--endpoint", sim + "/v1", "--model", "sim-model",
            "--dialect", "messages", "--port", str(port)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    with rolltap_process(args, url + "/health", env=env) as proc:
        before = cpu_seconds(proc)
        stored, size = asyncio.run(_loop(url, turns, marked, schemas))
        cpu = (cpu_seconds(proc) - before) / turns * 1e6
    return cpu, stored / turns, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools-kb", type=int, default=64, help="tool schemas' size (0: none)")
    parser.add_argument("--baseline-src", help="a src/ folder measured beside this one")
    args = parser.parse_args()
    if args.turns < 1 or args.repeat < 1 or args.tools_kb < 0:
        parser.error("--turns and --repeat must be at least 1, --tools-kb at least 0")
    schemas = tools(args.tools_kb)
    srcs = {"this": SRC}
    base = baseline_src(parser, args.baseline_src)
    if base is not None:
        srcs["baseline"] = base
    runs = [(shape, name) for shape in ("moving", "unmarked") for name in srcs]
    cpu: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    stored: dict[tuple[str, str], float] = {}
    last = 0
    with simulator(16) as sim:
        for r in range(args.repeat):
            for k in range(len(runs)):  # who goes first rotates
                shape, name = run = runs[(r + k) % len(runs)]
                marked = shape == "moving"
                micros, stored[run], last = measure(srcs[name], sim, args.turns, marked, schemas)
                cpu[run].append(micros)
    print(f"\n{args.turns} turns at c = 1, the last body {last / 1000:.0f} KB")
    print("| shape | code | gateway CPU per call, µs | range | request-event bytes per call |")
    print("|---|---|---|---|---|")
    for run in runs:
        values = cpu[run]
        print(f"| {run[0]} | {run[1]} | {statistics.median(values):.0f} "
              f"| {min(values):.0f}–{max(values):.0f} | {stored[run]:,.0f} |")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
