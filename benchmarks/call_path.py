"""The request path's length: rolltap functions and files one call runs through the gateway.

    python benchmarks/call_path.py [--baseline-src DIR] [--cold] [--files]

A simulator and a gateway run in one process; one call is made with raw aiohttp (not
rolltap) and counted with ``sys.setprofile``: every rolltap function entered while it is
in flight, the simulator's own (``rolltap/sim``) left out, and so are comprehensions and
generator expressions (Python 3.12 inlines comprehensions; they are not steps of the
path). A warm-up call goes first, so lazily built state (the upstream session, caches)
is not counted; ``--cold`` counts the first call instead.

Rows: the headline, one non-streaming chat → chat call; a chat stream; a Messages
harness translated to a chat upstream. ``--baseline-src DIR`` (a ``src/`` folder, e.g.
of a checkout of commit 93310de, before issue 14's redesign) measures the same calls on
that code in a second process of the same run, for the ``base`` columns and the
ratios; without it they are what this script measured there (Python 3.11). A second
table splits the headline by part (the top-level package under ``rolltap/``);
``--files`` lists its functions file by file. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import orjson

import rolltap
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator

ROOT = str(Path(rolltap.__file__).parent) + "/"
SIM = ROOT + "sim/"
ADMIN = "call-path-admin"
#: code-object names of comprehensions and generator expressions
_INLINE = ("<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>")
#: [functions, files, entries] per row as this script measured them at 93310de
RECORDED_BASE = {
    "warm": {"chat → chat": [71, 18, 91], "chat → chat, stream": [90, 22, 147],
             "messages → chat": [101, 25, 174]},
    "cold": {"chat → chat": [72, 19, 104], "chat → chat, stream": [91, 23, 148],
             "messages → chat": [102, 26, 175]},
}  # fmt: skip

CHAT = {"model": "m", "messages": [{"role": "user", "content": "count me"}], "max_tokens": 8}


@dataclass
class Count:
    """What one profiled call ran: distinct functions (file, line, name) and entries."""

    functions: set[tuple[str, int, str]] = field(default_factory=set)
    entries: Counter[tuple[str, int, str]] = field(default_factory=Counter)

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        path = code.co_filename
        if path.startswith(ROOT) and not path.startswith(SIM) and code.co_name not in _INLINE:
            key = (path.removeprefix(ROOT), code.co_firstlineno, code.co_qualname)
            self.functions.add(key)
            self.entries[key] += 1

    @property
    def files(self) -> set[str]:
        return {path for path, _, _ in self.functions}

    def row(self) -> list[int]:
        return [len(self.functions), len(self.files), sum(self.entries.values())]


@dataclass(frozen=True)
class Case:
    name: str
    route: str
    body: dict[str, Any]


CASES = [
    Case("chat → chat", "/v1/chat/completions", CHAT),
    Case("chat → chat, stream", "/v1/chat/completions", {**CHAT, "stream": True}),
    Case("messages → chat", "/v1/messages", CHAT),  # a Messages body too
]


async def call(http: aiohttp.ClientSession, base: str, key: str, case: Case) -> None:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    data = orjson.dumps(case.body)
    async with http.post(base + case.route, data=data, headers=headers) as resp:
        await resp.read()
        assert resp.status == 200, (resp.status, await resp.text())


async def profiled(
    http: aiohttp.ClientSession, base: str, key: str, case: Case, *, cold: bool
) -> Count:
    if not cold:
        await call(http, base, key, case)
    count = Count()
    sys.setprofile(count.hook)
    try:
        await call(http, base, key, case)
    finally:
        sys.setprofile(None)
    return count


async def measure(cold: bool) -> list[tuple[Case, Count]]:
    async with Simulator(SimConfig(seed=1)) as sim:
        endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
        settings = GatewaySettings(admin_token=ADMIN, trim_interval_s=0)
        async with Gateway(endpoint, settings) as gateway, aiohttp.ClientSession() as http:
            out = []
            for case in CASES:
                rollout = await gateway.register()
                base = gateway.describe(rollout)["anthropic_base_url"]
                count = await profiled(http, base, rollout.secret, case, cold=cold)
                out.append((case, count))
                await gateway.unregister(rollout.id)
            return out


def baseline(src: str | None, *, cold: bool) -> tuple[str, dict[str, list[int]]]:
    """The base columns: measured on ``src`` in a child process, else the recorded ones."""
    if src is None:
        return "recorded at 93310de", RECORDED_BASE["cold" if cold else "warm"]
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    args = [sys.executable, __file__, "--emit", *(["--cold"] if cold else [])]
    out = subprocess.run(args, env=env, capture_output=True, check=True, timeout=300)
    rows: dict[str, list[int]] = orjson.loads(out.stdout)
    return f"measured now on {src}", rows


def print_table(
    results: list[tuple[Case, Count]], base: dict[str, list[int]], *, cold: bool, source: str
) -> None:
    print(f"one call, {'cold' if cold else 'warm'}; base: {source}")
    print(f"{'call':<22} {'functions':>9} {'base':>5} {'× base':>7} {'files':>6} {'base':>5}"
          f" {'entries':>8} {'base':>5}")  # fmt: skip
    for case, count in results:
        functions, files, entries = count.row()
        b_functions, b_files, b_entries = base[case.name]
        print(
            f"{case.name:<22} {functions:>9} {b_functions:>5} {functions / b_functions:>7.2f}"
            f" {files:>6} {b_files:>5} {entries:>8} {b_entries:>5}"
        )


def print_parts(count: Count) -> None:
    parts: dict[str, tuple[set[str], int]] = {}
    for path, _, _ in count.functions:
        part = path.split("/")[0].removesuffix(".py")
        files, n = parts.get(part, (set(), 0))
        parts[part] = ({*files, path}, n + 1)
    print(f"\n{'headline by part':<22} {'functions':>9} {'files':>6}")
    for part, (files, n) in sorted(parts.items(), key=lambda item: -item[1][1]):
        print(f"{part:<22} {n:>9} {len(files):>6}")


def print_files(count: Count) -> None:
    by_file: dict[str, list[str]] = {}
    for path, _, name in sorted(count.functions):
        by_file.setdefault(path, []).append(name)
    for path, names in sorted(by_file.items()):
        print(f"\n{path} ({len(names)})")
        for name in names:
            print(f"    {name}")


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--baseline-src", help="a src/ folder to measure as the base")
    cli.add_argument("--cold", action="store_true", help="count the first call, not a warm one")
    cli.add_argument("--files", action="store_true", help="list the headline's functions")
    cli.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)  # the base's child
    args = cli.parse_args()
    results = asyncio.run(measure(args.cold))
    if args.emit:
        sys.stdout.buffer.write(orjson.dumps({case.name: c.row() for case, c in results}))
        return
    source, base = baseline(args.baseline_src, cold=args.cold)
    print_table(results, base, cold=args.cold, source=source)
    print_parts(results[0][1])
    if args.files:
        print_files(results[0][1])


if __name__ == "__main__":
    main()
