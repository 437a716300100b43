"""The model calls' own client against aiohttp's: CPU per call in the calling process.

    python benchmarks/upstream_client.py [--messages 2,400] [--calls 2000]
                                         [--concurrency 1,32] [--repeat 3]

The gateway sends every model call through :class:`rolltap.clients.relay.RelayClient`,
whose connections are rolltap's own (``rolltap.clients.wire``: the request written at
once, the answer parsed by llhttp through ``httptools``). Before, it sent them with an
``aiohttp.ClientSession`` set up as the gateway had it (its connector bounded by the
endpoint's ``max_connections``, no decompression, no User-Agent, the same timeouts and
headers built per call). This calls the simulator (``rolltap sim``, its own process)
with both, alternated within each repeat, a chat body of N messages (an agent's history,
as gateway_overhead.py sends) streamed and not, and prints the calling process's CPU
per call (user + system over the calls) for each, median and range over the repeats,
and their ratio. What it does not count: the gateway's own work around the call. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp
import uvloop
from _history_load import Target, body, history
from _procs import simulator
from multidict import CIMultiDict

from rolltap.clients.relay import RelayClient
from rolltap.config import EndpointConfig

Caller = Callable[[bytes, bool], Awaitable[int]]
#: what each body names as its sender (_history_load's bodies carry one)
_CLIENT = Target("client", "", "k")


def _aiohttp_caller(session: aiohttp.ClientSession, url: str) -> Caller:
    async def call(data: bytes, stream: bool) -> int:
        headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json"})
        headers.extend([("Authorization", "Bearer k"), ("X-Rolltap-Rollout", "r")])
        resp = await session.post(url, data=data, headers=headers, allow_redirects=False)
        got = 0
        if stream:
            async for chunk in resp.content.iter_any():
                got += len(chunk)
        else:
            got = len(await resp.read())
        resp.release()
        return got

    return call


def _rolltap_caller(client: RelayClient) -> Caller:
    async def call(data: bytes, stream: bool) -> int:
        async with client.send("/v1/chat/completions", data, {}, rollout_id="r") as resp:
            if not stream:
                return len(await resp.read())
            got = 0
            async for chunk in resp.iter_chunks():
                got += len(chunk)
            return got

    return call


async def _cpu_per_call(call: Caller, data: bytes, stream: bool, calls: int, c: int) -> float:
    async def worker(n: int) -> None:
        for _ in range(n):
            assert await call(data, stream) > 0

    await asyncio.gather(*(worker(20) for _ in range(c)))  # connections made, caches warm
    start = time.process_time()
    await asyncio.gather(*(worker(calls // c) for _ in range(c)))
    return (time.process_time() - start) / (calls // c * c) * 1e6


Results = dict[tuple[str, int, int, bool], list[float]]


async def _measure(base: str, args: argparse.Namespace) -> Results:
    endpoint = EndpointConfig(base_url=base + "/v1", model="m", api_key_env=None)
    client = RelayClient(endpoint, "k")
    connector = aiohttp.TCPConnector(
        limit=endpoint.max_connections, limit_per_host=0, ssl=ssl.create_default_context(),
        enable_cleanup_closed=False,
    )  # fmt: skip
    session = aiohttp.ClientSession(
        connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent",),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=600),
    )  # fmt: skip
    callers = {
        "aiohttp": _aiohttp_caller(session, base + "/v1/chat/completions"),
        "rolltap": _rolltap_caller(client),
    }
    out: Results = {}
    try:
        for _ in range(args.repeat):
            for n in args.messages:
                for stream in (False, True):
                    data = body(history(n), _CLIENT, stream=stream)
                    for c in args.concurrency:
                        for name, call in callers.items():  # alternated
                            cpu = await _cpu_per_call(call, data, stream, args.calls, c)
                            out.setdefault((name, n, c, stream), []).append(cpu)
    finally:
        await session.close()
        await client.aclose()
    return out


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=_ints, default=[2, 400])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=_ints, default=[1, 32])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.calls < 1 or args.repeat < 1 or min(args.concurrency) < 1:
        parser.error("--calls, --repeat and --concurrency must be at least 1")
    if min(args.messages) < 2 or any(n % 2 for n in args.messages):
        parser.error("--messages: even numbers of at least 2")
    with simulator(completion_tokens=16) as base:
        out = uvloop.run(_measure(base, args))
    print(f"client CPU per call, µs (median, range over {args.repeat}), calls to `rolltap sim`")
    print("| messages | c | stream | aiohttp ClientSession | rolltap (clients.wire) | ratio |")
    print("|---|---|---|---|---|---|")
    for n in args.messages:
        for stream in (False, True):
            for c in args.concurrency:
                old, new = out[("aiohttp", n, c, stream)], out[("rolltap", n, c, stream)]
                ratio = statistics.median(new) / statistics.median(old)
                print(f"| {n} | {c} | {'yes' if stream else 'no'} | {_cell(old)} | "
                      f"{_cell(new)} | {ratio:.2f} |")  # fmt: skip


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


if __name__ == "__main__":
    main()
