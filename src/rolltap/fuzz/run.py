"""Drive a fuzz run against a live server in another process, and measure it.

The run has two phases: a warm-up (``warmup_share`` of the requests), after which the
server's RSS is read, then the rest, after which it is read again (both readings
right after the target's routes were refreshed, i.e. its rollout replaced). What one request
allocates transiently (its body, parsed) is reached during the warm-up, so the growth
between the two readings is what the requests kept.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psutil

from rolltap.fuzz.check import Tally, judge
from rolltap.fuzz.requests import Route, build_request
from rolltap.fuzz.wire import RawAnswer, RawRequest, send

__all__ = ["FuzzResult", "FuzzTarget", "fuzz"]

AfterHook = Callable[[RawRequest, RawAnswer], Awaitable[None]]


@dataclass
class FuzzTarget:
    """A server under test: where it listens, its routes, and its process."""

    host: str
    port: int
    pid: int
    routes: list[Route]
    #: called on every answer (e.g. to unregister the rollouts a fuzzed POST created)
    after: AfterHook | None = None
    #: called every ``rotate_every`` requests for fresh routes (a new rollout: one
    #: rollout's event log legitimately grows with every call it takes)
    refresh: Callable[[], Awaitable[list[Route]]] | None = None
    rotate_every: int = 500


@dataclass
class FuzzResult:
    tally: Tally
    rss_warm: int = 0
    rss_end: int = 0
    seconds: float = 0.0
    timings: list[float] = field(default_factory=list)

    @property
    def rss_growth(self) -> int:
        return self.rss_end - self.rss_warm


async def _run_range(
    target: FuzzTarget,
    indices: range,
    *,
    seed: int,
    concurrency: int,
    tally: Tally,
    check: Callable[[RawRequest, RawAnswer | None], None],
    huge: int,
    stall_share: float,
    timeout_s: float,
) -> None:
    weights = [r.weight for r in target.routes]
    queue = iter(indices)

    async def worker() -> None:
        for i in queue:
            rng = random.Random(f"{seed}:route:{i}")
            route = rng.choices(target.routes, weights)[0]
            req = build_request(route, f"{seed}:{i}", huge=huge, stall_share=stall_share)
            req.label = f"#{i} {req.label}"
            try:
                ans = await send(target.host, target.port, req, timeout_s=timeout_s)
            except TimeoutError:
                tally.hangs += 1
                tally.violation(req, f"no answer within {timeout_s}s (hang)")
                continue
            check(req, ans)
            if ans is not None and target.after is not None:
                await target.after(req, ans)

    async with asyncio.TaskGroup() as tasks:
        for _ in range(concurrency):
            tasks.create_task(worker())


async def fuzz(
    target: FuzzTarget,
    *,
    requests: int,
    known: set[str],
    statuses: dict[str, int],
    seed: int = 0,
    concurrency: int = 8,
    huge: int = 1 << 20,
    stall_share: float = 0.005,
    timeout_s: float = 30.0,
    warmup_share: float = 0.2,
) -> FuzzResult:
    """Send ``requests`` hostile requests to ``target`` and judge every answer."""
    tally = Tally()
    result = FuzzResult(tally)
    process = psutil.Process(target.pid)

    def check(req: RawRequest, ans: RawAnswer | None) -> None:
        judge(req, ans, tally, known, statuses)

    started = time.monotonic()
    common = {
        "seed": seed, "concurrency": concurrency, "tally": tally, "check": check,
        "huge": huge, "stall_share": stall_share, "timeout_s": timeout_s,
    }  # fmt: skip
    every = target.rotate_every
    chunks = [range(a, min(requests, a + every)) for a in range(0, requests, every)]
    warm_chunks = max(1, round(len(chunks) * warmup_share))
    for n, chunk in enumerate(chunks):
        await _run_range(target, chunk, **common)  # type: ignore[arg-type]
        if target.refresh is not None:
            target.routes = await target.refresh()
        if n + 1 == warm_chunks:
            result.rss_warm = process.memory_info().rss
    result.rss_end = process.memory_info().rss
    result.seconds = time.monotonic() - started
    return result
