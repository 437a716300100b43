"""What an HTTP server alone costs a model call: the CPU floor under the gateway's own work.

    python benchmarks/server_floor.py [--messages 100] [--concurrency 64]
                                      [--calls 6400] [--repeat 3]

Three servers, each its own process on uvloop, that read a request's body whole and
answer a fixed chat answer (_floor_server.py): aiohttp's application as the gateway's
listener is set up (router, one middleware), aiohttp's low-level server (no router, no
middleware) and a bare llhttp protocol (``httptools``, as rolltap's own upstream client
parses; a floor, not a server). The load generator (this process, raw aiohttp, as
gateway_overhead.py's) sends ``--calls`` chat bodies of ``--messages`` messages over
``--concurrency`` connections, the servers alternated within each repeat. Prints each
server's CPU per call (user + system; median and range over the repeats) and what it
costs over the bare protocol: on a machine whose cores the load generator, the upstream
and the gateway share, what a gateway spends a call caps its throughput over direct
(gateway_overhead.py (b), "CPU-bound ceiling"), and this is the part of it that is the
server's before the gateway does anything. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

import aiohttp
import psutil
from _history_load import Target, body, history
from _procs import cpu_seconds, free_port, running

KINDS = {
    "app": "aiohttp application (router, middleware)",
    "low": "aiohttp low-level server",
    "bare": "bare llhttp protocol",
}


async def load(
    proc: psutil.Process, port: int, data: bytes, per_connection: int, concurrency: int
) -> float:
    """CPU seconds ``proc`` spends on ``per_connection`` calls over each of
    ``concurrency`` connections, once each has made 20 (not counted)."""
    url = f"http://127.0.0.1:{port}/r/floor/v1/chat/completions"
    headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def calls(n: int) -> None:
            for _ in range(n):
                async with http.post(url, data=data, headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"HTTP {resp.status} from {url}")

        await asyncio.gather(*(calls(20) for _ in range(concurrency)))
        before = cpu_seconds(proc)
        await asyncio.gather(*(calls(per_connection) for _ in range(concurrency)))
        return cpu_seconds(proc) - before


def measure(kind: str, data: bytes, calls: int, concurrency: int) -> float:
    """CPU µs a call of one ``kind`` of server."""
    port = free_port()
    command = [sys.executable, str(Path(__file__).with_name("_floor_server.py")), kind, str(port)]
    each = max(1, calls // concurrency)
    with running(command, f"http://127.0.0.1:{port}/health") as proc:
        spent = asyncio.run(load(proc, port, data, each, concurrency))
    return spent * 1e6 / (each * concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", type=int, default=6400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.messages < 2 or args.concurrency < 1 or args.calls < 1 or args.repeat < 1:
        parser.error("--messages of at least 2, --concurrency, --calls, --repeat of at least 1")
    data = body(history(args.messages), Target("floor", "", "k"), stream=False)
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(args.repeat):
        for kind in KINDS:
            samples[kind].append(measure(kind, data, args.calls, args.concurrency))
    bare = statistics.median(samples["bare"])
    print(
        f"\n{args.messages} messages ({len(data) / 1000:.0f} KB), {args.concurrency} "
        f"connections, {args.calls} calls, {psutil.cpu_count()} cores: server CPU per call, µs"
    )
    print("| server | CPU per call | range | over the bare protocol |")
    print("|---|---|---|---|")
    for kind, name in KINDS.items():
        values = samples[kind]
        mid = statistics.median(values)
        print(f"| {name} | {mid:.0f} | {min(values):.0f}–{max(values):.0f} | +{mid - bare:.0f} |")


if __name__ == "__main__":
    main()
