"""The token benchmark's upstream: the simulator's ``/v1/completions`` behind a folding front.

The simulator answers token-id prompts over its own toy vocabulary (567 ids) and refuses
any other id with a 400 (``token id 236809 is out of the vocabulary``), so it cannot take
Gemma's ids as they are. This process runs the simulator in-process and, in front of it,
a small aiohttp server that maps every prompt id into the simulator's word ids
(``id % (2 * len(WORDS))``: never a special token, so never a tool call) and forwards the
request unchanged otherwise; the simulator still seeds its answer from the (folded) ids
and applies its latency model. Its answers are ids of its own vocabulary, which Gemma's
tokenizer decodes to other text: fine for a load benchmark.

    python benchmarks/_tokens_upstream.py --port 8199 --ttft-ms 1500 --tokens-per-s 20
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import psutil
from _procs import running
from aiohttp import web

from rolltap.sim import SimConfig, Simulator
from rolltap.sim.words import WORDS

__all__ = ["FOLD", "Latency", "upstream_process"]

#: prompt ids are folded into the simulator's word ids (words, then space-prefixed words)
FOLD = 2 * len(WORDS)


@dataclass(frozen=True, slots=True)
class Latency:
    """The simulator's latency model: time to first token, then tokens at a pace."""

    ttft_ms: float
    tokens_per_s: float
    completion_tokens: int

    @property
    def per_call_s(self) -> float:
        return self.ttft_ms / 1000 + self.completion_tokens / self.tokens_per_s

    def args(self) -> list[str]:
        return [
            "--ttft-ms", str(self.ttft_ms), "--tokens-per-s", str(self.tokens_per_s),
            "--completion-tokens", str(self.completion_tokens),
        ]  # fmt: skip


async def serve(port: int, latency: Latency) -> None:
    config = SimConfig(
        ttft_ms=latency.ttft_ms, tokens_per_s=latency.tokens_per_s,
        completion_tokens=latency.completion_tokens, model="sim",
    )  # fmt: skip
    connector = aiohttp.TCPConnector(limit=0)
    async with Simulator(config) as sim, aiohttp.ClientSession(connector=connector) as session:
        target = sim.base_url + "/completions"

        async def completions(request: web.Request) -> web.Response:
            body = orjson.loads(await request.read())
            prompt = body.get("prompt")
            if isinstance(prompt, list) and all(type(i) is int for i in prompt):
                body["prompt"] = [i % FOLD for i in prompt]
            async with session.post(target, data=orjson.dumps(body)) as up:
                return web.Response(
                    body=await up.read(), status=up.status, content_type="application/json"
                )

        async def health(_: web.Request) -> web.Response:
            return web.json_response({"status": "ok"})

        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/completions", completions)
        app.router.add_get("/health", health)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
        try:
            await asyncio.Event().wait()  # until SIGTERM ends the process
        finally:
            await runner.cleanup()


def upstream_process(port: int, latency: Latency) -> AbstractContextManager[psutil.Process]:
    """Run this module as its own process on ``port`` until the block ends."""
    command = [sys.executable, str(Path(__file__)), "--port", str(port), *latency.args()]
    return running(command, f"http://127.0.0.1:{port}/health")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttft-ms", type=float, default=1500)
    parser.add_argument("--tokens-per-s", type=float, default=20)
    parser.add_argument("--completion-tokens", type=int, default=30)
    args = parser.parse_args()
    latency = Latency(args.ttft_ms, args.tokens_per_s, args.completion_tokens)
    asyncio.run(serve(args.port, latency))


if __name__ == "__main__":
    main()
