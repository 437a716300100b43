"""Hostile requests against a ``rolltap serve`` process (one worker, an allowlist)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from rolltap.fuzz import documented_codes, error_statuses, fuzz
from rolltap.fuzz.check import stray_exceptions
from rolltap.fuzz.session import serve_after, serve_process, serve_target
from rolltap.sim import Simulator

#: the error table (case, status, code) of the gateway contract
ERRORS_DOC = Path(__file__).parents[2] / "docs" / "gateway.md"
REQUESTS = 2_000
#: the supervisor's RSS may grow by this between the warm-up and the end: a body is at
#: most 192 KiB, and it keeps the last 10,000 results (a few hundred here)
RSS_BOUND = 16 << 20


@pytest.mark.timeout(300)
async def test_hostile_submissions_keep_every_invariant(sim: Simulator, tmp_path: Path) -> None:
    log = tmp_path / "serve.stderr"
    async with aiohttp.ClientSession() as http:
        with log.open("w") as stderr:
            async with serve_process(sim.base_url, tmp_path, stderr,
                                     allow=["serve.serve_harnesses:gated"]) as serve:  # fmt: skip
                result = await fuzz(
                    serve_target(serve), requests=REQUESTS, known=documented_codes(ERRORS_DOC),
                    statuses=error_statuses(), seed=13, huge=256 << 10,
                )  # fmt: skip
                after = await serve_after(http, serve)
    tally = result.tally
    assert tally.sent == REQUESTS
    assert tally.violations == 0, tally.examples
    assert after == {"inflight": 0, "intercepts": 0, "good": True, "alive": True}
    assert result.rss_growth <= RSS_BOUND, (result.rss_warm, result.rss_end)
    assert stray_exceptions(log.read_text()) == []
    for code in (
        "malformed_json",
        "invalid_request",
        "request_timeout",
        "invalid_api_key",
        "harness_not_allowed",
        "rollout_not_found",
    ):
        assert tally.codes[code] > 0, (code, tally.codes)  # fmt: skip
    assert tally.statuses[200] > 100
