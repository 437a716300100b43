"""Rollouts pinned to inference replicas vs round-robin: prefix-cache hit rate, TTFT, wall.

    python benchmarks/replicas.py [--mode direct|gateway] [--rollouts 96] [--turns 20]
        [--concurrency N] [--ttft-ms 5] [--prefill-ms-per-token 0.1] [--block-tokens 16]
        [--png PATH]

Three `rolltap sim` replicas, each its own process with a prefix cache (an LRU of
--block-tokens-token blocks; see rolltap.sim.prefix) holding half of the whole run's
working set, sized by a first pass over the same conversations against an in-process
simulator (same seed, so the same answers). Time to first token = --ttft-ms + the
prefill cost per uncached prompt token. --rollouts agents × --turns turns, each turn's
prompt the whole history (shared system prompt, ~60-token observations, 32-token
answers), all rollouts at once (--concurrency: fewer). Two arms, fresh replicas each, one run:

* --mode direct (works today): the harness posts to the replicas itself. "pinned" routes
  with rolltap.clients.replicas.ReplicaSet client-side, as the gateway will; "round-robin"
  sends each call to the next replica. Validates the simulator's numbers.
* --mode gateway: "pinned" is `rolltap gateway --endpoint A --endpoint B --endpoint C`,
  which pins each rollout to a replica; "round-robin" is the gateway in front of one URL,
  a round-robin proxy (in this process) over the replicas.

Reports hit rate (the replicas' /stats), TTFT p50/p99 (first SSE event, harness side),
wall, calls per replica and rollouts seen on more than one replica, with the ratios
pinned/round-robin; the routing's CPU per call against the gateway's CPU per call in
gateway mode. Routing is what the gateway runs per call for a pinned rollout, in a loop:
``ReplicaPin.route`` (re-pin if down) and ``ReplicaPin.slot`` (the replica's slot and
counters, around ``ReplicaSet.call``), plus each rollout's register and release; and, in
gateway mode, one call's CPU through an in-process gateway with one ``base_url`` against
``replicas = [that URL]`` (the single-URL path must not pay for replicas). Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from _plots import pyplot, save
from _procs import cpu_seconds, free_port, rolltap_process
from _replicas_load import (
    Call,
    DirectPinned,
    DirectRoundRobin,
    GatewayRouter,
    Router,
    quantile,
    round_robin_proxy,
    run_rollouts,
    working_set_blocks,
)

from rolltap.clients.replicas import ReplicaSet
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.events import EventLog
from rolltap.gateway import Gateway
from rolltap.gateway.pinning import ReplicaPin
from rolltap.sim import SimConfig, Simulator

REPLICAS = 3
COMPLETION_TOKENS = 32
GOAL_HIT_RATE = 0.90
GOAL_TTFT_RATIO = 0.5
GOAL_ROUTING_SHARE = 0.05


@dataclass
class Arm:
    name: str
    calls: list[Call]
    wall_s: float
    stats: list[dict[str, Any]]  # each replica's /stats
    gateway_cpu_s: float | None = None
    #: CPU seconds during the arm: this process (harness), the replicas together
    harness_cpu_s: float = 0.0
    replicas_cpu_s: float = 0.0

    @property
    def hit_rate(self) -> float:
        hits: int = sum(s["prefix_hit_tokens"] for s in self.stats)
        misses: int = sum(s["prefix_miss_tokens"] for s in self.stats)
        return hits / max(1, hits + misses)

    def ttft_ms(self, q: float) -> float:
        return quantile([c.ttft_s for c in self.calls], q) * 1e3

    def modeled_ms(self, q: float) -> float | None:
        """The replicas' own first-token delays (cache model only, no CPU queueing)."""
        modeled = [c.modeled_s for c in self.calls if c.modeled_s is not None]
        return quantile(modeled, q) * 1e3 if len(modeled) == len(self.calls) else None

    @property
    def same_replica_share(self) -> float | None:
        """Of the calls after a rollout's first, those on its previous call's replica
        (known in direct mode): 1/3 means no affinity at all, 1 pinned."""
        last: dict[int, str] = {}
        same = later = 0
        for call in sorted(self.calls, key=lambda c: (c.rollout, c.turn)):
            if not call.replica:
                return None
            if call.rollout in last:
                later += 1
                same += last[call.rollout] == call.replica
            last[call.rollout] = call.replica
        return same / later if later else None

    @property
    def split_rollouts(self) -> int:
        """Rollouts whose calls reached more than one replica."""
        seen: dict[str, int] = {}
        for stats in self.stats:
            for rollout in stats["requests_by_rollout"]:
                seen[rollout] = seen.get(rollout, 0) + 1
        return sum(1 for count in seen.values() if count > 1)


async def size_working_set(args: argparse.Namespace) -> int:
    """Blocks the run fills: the same conversations against an in-process simulator."""
    config = SimConfig(completion_tokens=COMPLETION_TOKENS)
    async with Simulator(config) as sim:
        router = DirectRoundRobin([sim.base_url])
        _, histories, _ = await run_rollouts(router, args.rollouts, args.turns, args.concurrency)
    return working_set_blocks(histories, args.block_tokens, config)


@contextmanager
def replicas(
    args: argparse.Namespace, capacity: int
) -> Iterator[tuple[list[str], list[psutil.Process]]]:
    """Start fresh simulator replicas; their root URLs and processes."""
    with ExitStack() as stack:
        urls, procs = [], []
        for _ in range(REPLICAS):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            procs.append(stack.enter_context(rolltap_process([
                "sim", "--port", str(port), "--completion-tokens", str(COMPLETION_TOKENS),
                "--ttft-ms", str(args.ttft_ms), "--prefill-ms-per-token",
                str(args.prefill_ms_per_token), "--prefix-cache-blocks", str(capacity),
                "--prefix-block-tokens", str(args.block_tokens),
            ], url + "/health")))  # fmt: skip
            urls.append(url)
        yield urls, procs


async def replica_stats(urls: list[str]) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        out = []
        for url in urls:
            async with http.get(url + "/stats") as resp:
                out.append(await resp.json())
        return out


async def direct_arm(name: str, urls: list[str], args: argparse.Namespace) -> Arm:
    bases = [url + "/v1" for url in urls]
    router: Router = DirectRoundRobin(bases)
    if name == "pinned":
        router = DirectPinned(ReplicaSet(bases))
    calls, _, wall = await run_rollouts(router, args.rollouts, args.turns, args.concurrency)
    return Arm(name, calls, wall, await replica_stats(urls))


async def register(admin: str, n: int) -> dict[int, tuple[str, str]]:
    targets = {}
    async with aiohttp.ClientSession() as http:
        for i in range(n):
            auth = {"Authorization": "Bearer bench"}
            async with http.post(admin + "/rollouts", headers=auth) as resp:
                data = await resp.json()
            targets[i] = (data["openai_base_url"], data["api_key"])
    return targets


async def gateway_arm(name: str, urls: list[str], args: argparse.Namespace) -> Arm:
    async with round_robin_proxy(urls) as proxy:
        upstreams = [url + "/v1" for url in urls] if name == "pinned" else [proxy + "/v1"]
        port = free_port()
        admin = f"http://127.0.0.1:{port}"
        flags = [arg for url in upstreams for arg in ("--endpoint", url)]
        command = ["gateway", *flags, "--model", "sim-model", "--port", str(port),
                   "--multiplex", "128"]  # fmt: skip
        with rolltap_process(command, admin + "/health") as gateway:
            router = GatewayRouter(await register(admin, args.rollouts))
            cpu = cpu_seconds(gateway)
            calls, _, wall = await run_rollouts(router, args.rollouts, args.turns, args.concurrency)
            cpu = cpu_seconds(gateway) - cpu
    return Arm(name, calls, wall, await replica_stats(urls), gateway_cpu_s=cpu)


def run_arm(name: str, args: argparse.Namespace, capacity: int) -> Arm:
    with replicas(args, capacity) as (urls, procs):
        run = direct_arm if args.mode == "direct" else gateway_arm
        harness, sims = time.process_time(), sum(cpu_seconds(p) for p in procs)
        arm = asyncio.run(run(name, urls, args))
        arm.harness_cpu_s = time.process_time() - harness
        arm.replicas_cpu_s = sum(cpu_seconds(p) for p in procs) - sims
        return arm


@dataclass
class _Rollout:
    """What ReplicaPin needs of a rollout (rolltap.gateway.pinning.Pinned)."""

    id: str
    lease: Any = None
    upstream: Any = None
    log: EventLog = field(default_factory=EventLog)


async def routing_cpu_per_call(rollouts: int, turns: int) -> float:
    """CPU seconds the gateway's routing spends per call of a pinned rollout: its
    register, ``turns`` calls (route, then the replica's slot), its release."""
    replicas = ReplicaSet([f"http://r{i}:8000/v1" for i in range(REPLICAS)])

    async def never(url: str) -> Any:
        raise AssertionError("no replica goes down here: nothing moves")

    start = time.process_time()
    pins = []
    for i in range(rollouts):
        rollout = _Rollout(f"rollout-{i}")
        pins.append((ReplicaPin(rollout.id, replicas, replicas.register(rollout.id), never),
                     rollout))  # fmt: skip
    for _ in range(turns):
        for pin, rollout in pins:
            await pin.route(rollout)
            async with pin.slot(rollout):
                pass
    for pin, _ in pins:
        pin.unpin()
        pin.release()
    return (time.process_time() - start) / (rollouts * turns)


async def path_cpu_per_call(replicas: bool, calls: int = 1024, rollouts: int = 16) -> float:
    """CPU seconds per non-streaming call through an in-process gateway to an in-process
    simulator (harness, gateway and simulator in this process): an endpoint with one
    ``base_url``, or with ``replicas = [that URL]`` (the whole replica path, one replica)."""
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    async with Simulator(SimConfig(seed=1)) as sim:
        if replicas:
            endpoint = EndpointConfig(replicas=[sim.base_url], model="sim-model")
        else:
            endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
        settings = GatewaySettings(admin_token="bench")
        async with Gateway(endpoint, settings) as gateway, aiohttp.ClientSession() as http:
            targets = []
            for _ in range(rollouts):
                info = gateway.describe(await gateway.register())
                auth = {"Authorization": f"Bearer {info['api_key']}"}
                targets.append((info["openai_base_url"] + "/chat/completions", auth))

            async def turns(url: str, headers: dict[str, str]) -> None:
                for _ in range(calls // rollouts):
                    async with http.post(url, data=body, headers=headers) as resp:
                        await resp.read()

            await asyncio.gather(*(turns(*t) for t in targets))  # warm up
            start = time.process_time()
            await asyncio.gather(*(turns(*t) for t in targets))
            return (time.process_time() - start) / (calls // rollouts * rollouts)


async def path_cpu(rounds: int = 3) -> tuple[float, float]:
    """The least CPU per call of ``rounds`` alternating runs: one URL, one replica."""
    single, replica = [], []
    for _ in range(rounds):
        single.append(await path_cpu_per_call(False))
        replica.append(await path_cpu_per_call(True))
    return min(single), min(replica)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_table(arms: dict[str, Arm], args: argparse.Namespace, capacity: int, ws: int) -> None:
    print(f"\nmode {args.mode}: {args.rollouts} rollouts × {args.turns} turns "
          f"({args.concurrency} at once), "
          f"{REPLICAS} replicas; working set {ws} blocks of {args.block_tokens} tokens; "
          f"LRU {capacity} blocks per replica (half); TTFT = {args.ttft_ms:g} ms + "
          f"{args.prefill_ms_per_token:g} ms per uncached prompt token")  # fmt: skip
    head = f"{'arm':<12} {'hit rate':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'modeled':>13}"
    print(f"{head} {'wall s':>7} {'calls per replica':>18} {'split':>6} {'X-Session-ID':>12}")
    for arm in arms.values():
        calls = "/".join(str(s["requests"]) for s in arm.stats)
        sessions = sum(sum(s["requests_by_session"].values()) for s in arm.stats)
        low, high = arm.modeled_ms(0.5), arm.modeled_ms(0.99)
        modeled = "-" if low is None or high is None else f"{low:.1f}/{high:.1f}"
        print(f"{arm.name:<12} {arm.hit_rate:>8.1%} {arm.ttft_ms(0.5):>9.1f} "
              f"{arm.ttft_ms(0.99):>9.1f} {modeled:>13} {arm.wall_s:>7.2f} {calls:>18} "
              f"{arm.split_rollouts:>6} {sessions:>12}")  # fmt: skip
    print(
        "(TTFT in ms at the harness; modeled: p50/p99 of the replicas' own first-token "
        "delay, without this machine's CPU queueing; split: rollouts on > 1 replica)"
    )
    for arm in arms.values():
        share = arm.same_replica_share
        if share is not None:
            print(f"{arm.name}: {share:.0%} of calls on the replica of the rollout's previous call")
    for arm in arms.values():
        gateway = "" if arm.gateway_cpu_s is None else f", gateway {arm.gateway_cpu_s:.2f}"
        print(
            f"CPU s, {arm.name}: harness {arm.harness_cpu_s:.2f}, "
            f"replicas {arm.replicas_cpu_s:.2f}{gateway}"
        )
    pinned, rr = arms["pinned"], arms["round-robin"]
    ratio = pinned.ttft_ms(0.5) / rr.ttft_ms(0.5)
    print(
        f"pinned/round-robin: TTFT p50 {ratio:.2f}, p99 "
        f"{pinned.ttft_ms(0.99) / rr.ttft_ms(0.99):.2f}, wall {pinned.wall_s / rr.wall_s:.2f}"
    )
    low_pinned, low_rr = pinned.modeled_ms(0.5), rr.modeled_ms(0.5)
    if low_pinned is not None and low_rr is not None:
        print(f"  modeled TTFT p50 {low_pinned / low_rr:.2f}")
    hit_ok = pinned.hit_rate >= GOAL_HIT_RATE
    print(f"goal hit rate pinned ≥ {GOAL_HIT_RATE:.0%}: {verdict(hit_ok)}")
    print(
        f"goal TTFT p50 pinned ≤ {GOAL_TTFT_RATIO} × round-robin: "
        f"{verdict(ratio <= GOAL_TTFT_RATIO)}"
    )
    if pinned.split_rollouts or sum(1 for s in pinned.stats if s["requests"]) < REPLICAS:
        print("WARNING: pinned calls were not spread one replica per rollout over all "
              "replicas")  # fmt: skip


def print_routing(arms: dict[str, Arm], routing_s: float, calls: int) -> None:
    what = "routing (ReplicaPin route + slot, register, release) CPU"
    print(f"{what}: {routing_s * 1e6:.1f} µs per call")
    gateway_s = arms["pinned"].gateway_cpu_s
    if gateway_s is None:
        print("  (the gateway's CPU per call is measured in --mode gateway)")
        return
    share = routing_s / (gateway_s / calls)
    print(
        f"  gateway CPU {gateway_s / calls * 1e3:.3f} ms per call: routing {share:.1%} of it; "
        f"goal ≤ {GOAL_ROUTING_SHARE:.0%}: {verdict(share <= GOAL_ROUTING_SHARE)}"
    )


def plot(arms: dict[str, Arm], path: Path, turns: int) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for arm in arms.values():
        by_turn = [[c.ttft_s * 1e3 for c in arm.calls if c.turn == t] for t in range(turns)]
        left.plot(range(1, turns + 1), [quantile(v, 0.5) for v in by_turn], marker="o",
                  label=f"{arm.name} (hit rate {arm.hit_rate:.0%})")  # fmt: skip
        ordered = sorted(c.ttft_s * 1e3 for c in arm.calls)
        right.plot(ordered, [i / len(ordered) for i in range(len(ordered))], label=arm.name)
    left.set(xlabel="turn", ylabel="median TTFT (ms)", ylim=(0, None))
    right.set(xlabel="TTFT (ms)", ylabel="fraction of calls")
    left.legend()
    right.legend()
    save(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("direct", "gateway"), default="direct")
    parser.add_argument("--rollouts", type=int, default=96)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--concurrency", type=int, help="rollouts at once [all]")
    # 5 ms before the first token, 10k uncached tokens/s of prefill: a loaded engine
    parser.add_argument("--ttft-ms", type=float, default=5.0)
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.1)
    parser.add_argument("--block-tokens", type=int, default=16)
    parser.add_argument("--png", type=Path, help="plot TTFT by turn and its CDF here")
    args = parser.parse_args()
    args.concurrency = args.concurrency or args.rollouts
    ws = asyncio.run(size_working_set(args))
    capacity = max(1, ws // 2)
    arms = {name: run_arm(name, args, capacity) for name in ("round-robin", "pinned")}
    print_table(arms, args, capacity, ws)
    routing_s = asyncio.run(routing_cpu_per_call(args.rollouts, args.turns))
    print_routing(arms, routing_s, args.rollouts * args.turns)
    if args.mode == "gateway":
        single, replica = asyncio.run(path_cpu())
        print(
            f"one call's CPU (in process, best of 3): base_url {single * 1e6:.0f} µs, "
            f"replicas = [that URL] {replica * 1e6:.0f} µs: ratio {replica / single:.2f}"
        )
    if args.png is not None:
        plot(arms, args.png, args.turns)


if __name__ == "__main__":
    main()
