"""10,000 hostile requests against a ``rolltap gateway`` process: every harness route of
the three dialects and every admin route (see rolltap.fuzz for what is mutated)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from rolltap.fuzz import documented_codes, error_statuses, fuzz
from rolltap.fuzz.check import stray_exceptions
from rolltap.fuzz.session import gateway_after, gateway_process, gateway_target
from rolltap.sim import Simulator

#: the error table (case, status, code) of the gateway contract
ERRORS_DOC = Path(__file__).parents[2] / "docs" / "gateway.md"
REQUESTS = 10_000
#: RSS growth allowed between the warm-up (2,000 requests) and the end (8,000 more).
#: What one request allocates transiently (a body of at most 192 KiB, parsed: a few
#: times that) is reached in the warm-up already; 16 MiB over 8,000 requests catches
#: anything a request keeps from about 2 KiB up, while leaving room for the allocator's
#: arenas to settle.
RSS_BOUND = 16 << 20


@pytest.mark.timeout(400)
async def test_hostile_requests_keep_every_invariant(sim: Simulator, tmp_path: Path) -> None:
    known, statuses = documented_codes(ERRORS_DOC), error_statuses()
    log = tmp_path / "gateway.stderr"
    async with aiohttp.ClientSession() as http:
        with log.open("w") as stderr:
            async with gateway_process(sim.base_url, stderr) as gateway:
                target = await gateway_target(http, gateway)
                result = await fuzz(
                    target, requests=REQUESTS, known=known, statuses=statuses, seed=13,
                    huge=256 << 10,
                )  # fmt: skip
                after = await gateway_after(http, gateway)
    tally = result.tally
    assert tally.sent == REQUESTS
    assert tally.violations == 0, tally.examples
    assert tally.hangs == 0
    assert after == {"intercepts": 0, "good": True, "alive": True}
    assert result.rss_growth <= RSS_BOUND, (result.rss_warm, result.rss_end)
    # nothing raised in rolltap: the log holds only aiohttp's parser refusing requests
    assert stray_exceptions(log.read_text()) == []
    # the mutations reached what they aim at
    for code in (
        "malformed_json",
        "invalid_request",
        "request_timeout",
        "request_too_large",
        "invalid_api_key",
        "rollout_not_found",
        "not_found",
        "method_not_allowed",
    ):
        assert tally.codes[code] > 0, (code, tally.codes)  # fmt: skip
    assert tally.statuses[200] > 500 and tally.framing > 0 and tally.cut > 0
