"""Schemathesis against a live ``rolltap serve`` API, from the service's own ``/openapi.json``.

The service allows one harness only (``--allow-harness`` with a test harness), so what
the generator names as code is refused with ``403 harness_not_allowed``. Every answer
must conform to the document (no 5xx, a documented status and shape), and every error
must carry a code from docs/gateway.md's error table at that code's status.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import negative_data_rejection
from schemathesis.core.result import Ok

from rolltap.fuzz import documented_codes, error_statuses
from serve.servekit import TOKEN, ServiceFactory

#: the error table (case, status, code) of the gateway contract
ERRORS_DOC = Path(__file__).parents[2] / "docs" / "gateway.md"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
#: examples per operation and mode: enough to try every operation's shapes, bounded for CI
EXAMPLES = 25


def _check_error(response: Any, known: set[str], statuses: dict[str, int]) -> str | None:
    """The error code of an error answer, checked against docs/gateway.md's table and its status."""
    if response.status_code < 400:
        return None
    code = response.json()["error"]["code"]
    assert code in known, (code, response.status_code, response.text[:300])
    assert statuses.get(code) == response.status_code, (code, response.status_code)
    return str(code)


def exercise(schema: Any, base_url: str) -> Counter[str]:
    """Run every operation's generated cases (valid and invalid) against ``base_url``."""
    known, statuses = documented_codes(ERRORS_DOC), error_statuses()
    seen: Counter[str] = Counter()
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        raw = operation.definition.raw
        # only what takes input can be sent invalid input
        takes = "requestBody" in raw or "parameters" in raw
        for mode in [GenerationMode.POSITIVE] + [GenerationMode.NEGATIVE] * takes:

            @settings(
                max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck),
            )  # fmt: skip
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                response = case.call(base_url=base_url, headers=HEADERS, timeout=30)
                # no 5xx, statuses, content types and bodies as the document says; an
                # invalid body may still be taken (the document is narrower than the
                # parsers: a reward weight spelled 2e-1), so that one check is left out
                case.validate_response(response, excluded_checks=[negative_data_rejection])
                code = _check_error(response, known, statuses)
                seen[code or str(response.status_code)] += 1

            check()
    return seen


@pytest.mark.timeout(300)
async def test_serve_api_conforms_to_its_openapi_document(
    start_service: ServiceFactory,
) -> None:
    service = await start_service(
        workers=1,
        allow_harness=["serve.serve_harnesses:gated"],
        test_hooks=False,
        auth_failures_per_minute=10**9,  # the generator sends wrong tokens on purpose
    )
    async with aiohttp.ClientSession() as http, http.get(service.url + "/openapi.json") as resp:
        assert resp.status == 200  # no token needed
        document = await resp.json()
    schema = schemathesis.openapi.from_dict(document)
    # hypothesis and requests block: off the loop, which keeps serving the service
    seen = await asyncio.to_thread(exercise, schema, service.url)
    assert sum(seen.values()) >= len(document["paths"])
    for code in ("invalid_request", "rollout_not_found", "harness_not_allowed", "invalid_api_key"):
        assert seen[code] > 0, (code, seen)
    status = service.supervisor.status()
    assert status["inflight"] == 0 and status["ready_workers"] == 1  # nothing left, none lost
