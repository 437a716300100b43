"""The token benchmark's backend arms: calls/s and CPU per call per backend, against the relay.

One simulator process (no latency: the gateway's own cost is what is measured) serves
every backend: its chat route (the relays; ``return_token_ids`` for the capturing one)
and its four token routes. Each backend has a gateway process of its own
(benchmarks/_backend_gateway.py), all started before the first round; a token client
renders with a real Hugging Face tokenizer over the simulator's vocabulary
(tests/gateway/simtok.py), so its second turns extend the first (``render: extend``) as a
real model's would. The load is raw aiohttp in this process: ``concurrency`` rollouts at
a time, each registered, ``turns`` chat calls (each resends the history with the answer
it got and a new user message), then deleted. Rounds take the backends in turn (the
first rotating) so that drift on a shared machine lands on all alike; a backend's calls/s
and its gateway's CPU ms per call are the medians over the rounds, and each is also
given relative to the plain relay's.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psutil
from _procs import cpu_seconds, free_port, rolltap_process

__all__ = ["BACKENDS", "measure_backends", "print_backends"]

_GATEWAY = Path(__file__).parent / "_backend_gateway.py"
_TESTS = Path(__file__).parent.parent / "tests"
_ADMIN = {"Authorization": "Bearer bench"}

#: backend → its endpoint's fields beyond base_url and model
BACKENDS: dict[str, dict[str, Any]] = {
    "relay": {},
    "relay, capture_tokens": {"capture_tokens": True},
    "tokens vllm (/v1/completions)": {"client": "tokens", "completions_api": "vllm"},
    "tokens llamacpp (/completion)": {"client": "tokens", "completions_api": "llamacpp"},
    "tokens vllm-generate": {"client": "tokens", "completions_api": "vllm-generate"},
    "tokens sglang (/generate)": {"client": "tokens", "completions_api": "sglang"},
}


@contextmanager
def _gateway(fields: dict[str, Any]) -> Iterator[tuple[str, psutil.Process]]:
    """A gateway process for ``fields``: its admin URL once ready, its handle."""
    proc = subprocess.Popen(
        [sys.executable, str(_GATEWAY), orjson.dumps(fields).decode()], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        admin = proc.stdout.readline().decode().strip()
        if not admin:
            raise RuntimeError(f"gateway for {fields} exited ({proc.wait()})")
        yield admin, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


async def _rollout(http: aiohttp.ClientSession, admin: str, turns: int) -> None:
    async with http.post(admin + "/rollouts", json={}, headers=_ADMIN) as resp:
        rollout = await resp.json()
    url = rollout["openai_base_url"] + "/chat/completions"
    headers = {"Authorization": f"Bearer {rollout['api_key']}"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Question 0: how many?"}]
    for turn in range(turns):
        body = orjson.dumps({"model": "m", "messages": messages, "max_tokens": 16})
        async with http.post(url, data=body, headers=headers) as resp:
            answer = orjson.loads(await resp.read())
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {answer}")
        content = answer["choices"][0]["message"]["content"]
        messages += [{"role": "assistant", "content": content},
                     {"role": "user", "content": f"Question {turn + 1}: and then?"}]  # fmt: skip
    async with http.delete(f"{admin}/rollouts/{rollout['id']}", headers=_ADMIN) as resp:
        await resp.read()


async def _round(
    http: aiohttp.ClientSession, admin: str, rollouts: int, turns: int, concurrency: int
) -> float:
    """``rollouts`` rollouts, ``concurrency`` at a time; seconds taken."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await _rollout(http, admin, turns)

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(rollouts):
            group.create_task(one())
    return time.perf_counter() - t0


async def _rounds(
    gateways: dict[str, tuple[str, psutil.Process]], *, rounds: int, rollouts: int,
    turns: int, concurrency: int,
) -> dict[str, list[tuple[float, float]]]:  # fmt: skip
    """Per backend, each round's (calls/s, gateway CPU ms per call); one unmeasured round
    first (connections, caches)."""
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in gateways}
    names = list(gateways)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        for name in names:
            await _round(http, gateways[name][0], concurrency, turns, concurrency)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                admin, proc = gateways[name]
                cpu0 = cpu_seconds(proc)
                wall = await _round(http, admin, rollouts, turns, concurrency)
                calls = rollouts * turns
                out[name].append((calls / wall, (cpu_seconds(proc) - cpu0) * 1000 / calls))
    return out


def measure_backends(
    *, rounds: int = 5, rollouts: int = 64, turns: int = 4, concurrency: int = 16
) -> list[dict[str, Any]]:
    """One row per backend: median calls/s and CPU ms per call, and both / the relay's."""
    sys.path.insert(0, str(_TESTS))
    from gateway.simtok import build_sim_tokenizer

    port = free_port()
    sim_url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tokenizer = build_sim_tokenizer(Path(tmp) / "tok")
        sim_args = ["sim", "--port", str(port), "--seed", "7", "--completion-tokens", "16"]
        stack.enter_context(rolltap_process(sim_args, sim_url + "/health"))
        gateways = {}
        for name, fields in BACKENDS.items():
            endpoint = {"base_url": sim_url + "/v1", "model": "sim-model", **fields}
            if fields.get("client") == "tokens":
                endpoint["tokenizer"] = str(tokenizer)
            gateways[name] = stack.enter_context(_gateway(endpoint))
        samples = asyncio.run(_rounds(
            gateways, rounds=rounds, rollouts=rollouts, turns=turns, concurrency=concurrency
        ))  # fmt: skip
    rows: list[dict[str, Any]] = []
    for name, values in samples.items():
        rate = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        rows.append(
            {
                "backend": name,
                "calls_per_s": rate,
                "cpu_ms_per_call": cpu,
                "cpu_range": (min(v[1] for v in values), max(v[1] for v in values)),
            }
        )
    base = rows[0]
    for row in rows:
        row["rate_vs_relay"] = row["calls_per_s"] / base["calls_per_s"]
        row["cpu_vs_relay"] = row["cpu_ms_per_call"] / base["cpu_ms_per_call"]
    return rows


def print_backends(rows: list[dict[str, Any]], *, calls: int, rounds: int) -> None:
    print(f"\nbackends: calls/s through the gateway and its CPU per call, median of {rounds} "
          f"rounds of {calls} calls, relative to the plain relay in the same run")  # fmt: skip
    print("| backend | calls/s | × relay | gateway CPU ms/call (min–max) | × relay |")
    print("|---|---|---|---|---|")
    for r in rows:
        low, high = r["cpu_range"]
        print(
            f"| {r['backend']} | {r['calls_per_s']:,.0f} | {r['rate_vs_relay']:.2f} | "
            f"{r['cpu_ms_per_call']:.2f} ({low:.2f}–{high:.2f}) | {r['cpu_vs_relay']:.2f} |"
        )
