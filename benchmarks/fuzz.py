"""Report command: 100,000 hostile requests at ``rolltap gateway`` (harness routes of
the three dialects and the admin API) and 20,000 at ``rolltap serve``; prints the
docs/reliability.md rows. Not run in CI (tests/fuzz runs 10,000 + 2,000).

    python benchmarks/fuzz.py [--requests 100000] [--seed 13]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import aiohttp

from rolltap.fuzz import FuzzResult, documented_codes, error_statuses, fuzz
from rolltap.fuzz.check import stray_exceptions
from rolltap.fuzz.session import (
    gateway_after,
    gateway_process,
    gateway_target,
    serve_after,
    serve_process,
    serve_target,
)
from rolltap.sim import SimConfig, Simulator

#: the error table (case, status, code) of the gateway contract
ERRORS_DOC = Path(__file__).parents[1] / "docs" / "gateway.md"
MB = 1 << 20


def _row(what: str, result: FuzzResult, after: dict[str, object], log: str, cmd: str) -> str:
    tally = result.tally
    bad = tally.violations + len(stray_exceptions(log)) + (not after["good"])
    return (
        f"| {what}: every invariant held = {bad == 0} (violations {tally.violations}, "
        f"5xx {sum(n for s, n in tally.statuses.items() if s >= 500)}, framing exempt "
        f"{tally.framing}, RSS {result.rss_warm / MB:.0f}→{result.rss_end / MB:.0f} MB) "
        f"| {tally.sent:,} | 0 | 0 | 0 | {tally.hangs} | `{cmd}` |"
    )


async def main(requests: int, seed: int) -> int:
    known, statuses = documented_codes(ERRORS_DOC), error_statuses()
    cmd = f"python benchmarks/fuzz.py --requests {requests} --seed {seed}"
    rows, ok = [], True
    async with Simulator(SimConfig(seed=seed)) as sim, aiohttp.ClientSession() as http:
        with tempfile.TemporaryDirectory() as tmp:
            gw_log, sv_log = Path(tmp) / "gateway.log", Path(tmp) / "serve.log"
            with gw_log.open("w") as stderr:
                async with gateway_process(sim.base_url, stderr) as gateway:
                    target = await gateway_target(http, gateway)
                    result = await fuzz(target, requests=requests, known=known,
                                        statuses=statuses, seed=seed)  # fmt: skip
                    after = await gateway_after(http, gateway)
            rows.append(_row("hostile input, gateway (harness + admin)", result, after,
                             gw_log.read_text(), cmd))  # fmt: skip
            ok &= result.tally.violations == 0 and after["good"] is True
            with sv_log.open("w") as stderr:
                # a listed name that exists nowhere: the allowlist is on, nothing custom runs
                allow = ["rolltap_fuzz.none:none"]
                async with serve_process(sim.base_url, Path(tmp), stderr, allow=allow) as serve:
                    result = await fuzz(serve_target(serve), requests=requests // 5,
                                        known=known, statuses=statuses, seed=seed)  # fmt: skip
                    after = await serve_after(http, serve)
            rows.append(_row("hostile input, serve API", result, after, sv_log.read_text(), cmd))
            ok &= result.tally.violations == 0 and after["good"] is True
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.requests, args.seed)))
