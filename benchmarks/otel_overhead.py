"""Tracing cost: gateway calls/s and CPU per call with OpenTelemetry off and on.

    python benchmarks/otel_overhead.py [--rollouts 64] [--turns 50] [--rounds 5]
                                       [--baseline-src DIR] [--quick]

Gateways in front of one simulator (zero delay), each its own process: ``off`` (this
code, tracing off), ``on`` (this code, ``--otel``: every call a span, batched over
OTLP/HTTP to a stand-in collector in this process, which counts what arrives) and, with
``--baseline-src DIR`` (e.g. a checkout of the code before tracing existed), ``base``:
that code's gateway. Each round drives every gateway in turn, in a rotating order, with
ROLLOUTS concurrent rollouts × TURNS non-streaming calls (raw aiohttp, as in
gateway_overhead.py); the table gives the median calls/s and gateway CPU ms per call
over the rounds and the ratios. Needs the ``otel`` extra. Not part of CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from contextlib import ExitStack
from typing import Any

import aiohttp
import orjson
import psutil
from _procs import cpu_seconds, free_port, rolltap_process, running
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

BODY = orjson.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "benchmark me"}], "max_tokens": 16}
)

#: per gateway: calls/s and gateway CPU ms per call, one of each per round
Results = dict[str, tuple[list[float], list[float]]]


class Collector:
    """A stand-in OTLP/HTTP collector: counts the spans it is sent."""

    def __init__(self) -> None:
        self.spans = 0
        self.posts = 0

    async def receive(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        self.posts += 1
        self.spans += sum(len(s.spans) for r in export.resource_spans for s in r.scope_spans)
        return web.Response(content_type="application/x-protobuf", body=b"")


async def register(http: aiohttp.ClientSession, admin: str, n: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(n):
        async with http.post(admin + "/rollouts", headers={"Authorization": "Bearer bench"}) as r:
            data: dict[str, Any] = await r.json()
        out.append((data["openai_base_url"] + "/chat/completions", data["api_key"]))
    return out


async def wave(http: aiohttp.ClientSession, rollouts: list[tuple[str, str]], turns: int) -> float:
    """Calls/s of ``turns`` calls on each rollout at once."""

    async def rollout(url: str, key: str) -> None:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        for _ in range(turns):
            async with http.post(url, data=BODY, headers=headers) as resp:
                await resp.read()
                assert resp.status == 200, resp.status

    loop = asyncio.get_running_loop()
    start = loop.time()
    async with asyncio.TaskGroup() as tg:
        for url, key in rollouts:
            tg.create_task(rollout(url, key))
    return len(rollouts) * turns / (loop.time() - start)


async def measure(
    args: argparse.Namespace, gateways: dict[str, tuple[str, psutil.Process]], sink: Collector
) -> Results:
    results: Results = {n: ([], []) for n in gateways}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        targets = {n: await register(http, url, args.rollouts) for n, (url, _) in gateways.items()}
        for name in gateways:  # warm every path
            await wave(http, targets[name][:8], 20)
        names = list(gateways)
        for i in range(args.rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                proc = gateways[name][1]
                cpu0 = cpu_seconds(proc)
                rate = await wave(http, targets[name], args.turns)
                cpu_ms = (cpu_seconds(proc) - cpu0) * 1000 / (args.rollouts * args.turns)
                results[name][0].append(rate)
                results[name][1].append(cpu_ms)
    return results


def report(results: Results, sink: Collector, calls: int) -> None:
    med = {n: (statistics.median(r), statistics.median(c)) for n, (r, c) in results.items()}
    print(f"\n{'gateway':<8} {'calls/s (median)':>17} {'min-max':>15} {'CPU ms/call':>12}")
    for name, (rates, _) in results.items():
        rate, cpu = med[name]
        print(f"{name:<8} {rate:>17.0f} {min(rates):>7.0f}-{max(rates):<7.0f} {cpu:>12.3f}")
    off_rate, off_cpu = med["off"]
    on_rate, on_cpu = med["on"]
    print(f"\non/off calls/s {on_rate / off_rate:.3f}; CPU per call +{on_cpu - off_cpu:.3f} ms "
          f"({on_cpu / off_cpu - 1:+.1%})")  # fmt: skip
    if "base" in med:
        base_rate, base_cpu = med["base"]
        print(f"off/base calls/s {off_rate / base_rate:.3f}; CPU per call "
              f"{off_cpu - base_cpu:+.3f} ms ({off_cpu / base_cpu - 1:+.1%})")  # fmt: skip
    print(f"collector: {sink.spans} spans in {sink.posts} exports for {calls} traced calls")


async def _collector(sink: Collector, port: int) -> web.AppRunner:
    app = web.Application(client_max_size=2**26)
    app.router.add_post("/v1/traces", sink.receive)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-src", help="a src/ folder whose gateway is 'base'")
    parser.add_argument("--quick", action="store_true", help="a rough run in under a minute")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.rounds = 10, 3
    sim_port, sink_port = free_port(), free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    traced = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}"}
    sink = Collector()

    async def run(gateways: dict[str, tuple[str, psutil.Process]]) -> None:
        collector = await _collector(sink, sink_port)
        try:
            results = await measure(args, gateways, sink)
            await asyncio.sleep(6)  # the batch processor exports every 5 s
        finally:
            await collector.cleanup()
        traced_calls = len(results["on"][0]) * args.rollouts * args.turns
        report(results, sink, traced_calls)

    with ExitStack() as stack:
        stack.enter_context(rolltap_process(["sim", "--port", str(sim_port)], sim_url + "/health"))
        gateways = {}
        for name, otel, src in (("off", "--no-otel", None), ("on", "--otel", None),
                                ("base", None, args.baseline_src)):  # fmt: skip
            if name == "base" and src is None:
                continue
            port = free_port()
            argv = ["gateway", "--endpoint", sim_url + "/v1", "--model", "sim-model",
                    "--port", str(port), "--multiplex", "128"]  # fmt: skip
            argv += [otel] if otel else []
            path = [src] if src else sys.path
            boot = f"import sys; sys.path[:0] = {path!r}; from rolltap.cli.main import main; main()"
            env = traced if name == "on" else clean
            url = f"http://127.0.0.1:{port}"
            proc = stack.enter_context(
                running([sys.executable, "-c", boot, *argv], url + "/health", env=env)
            )
            gateways[name] = (url, proc)
        asyncio.run(run(gateways))


if __name__ == "__main__":
    main()
