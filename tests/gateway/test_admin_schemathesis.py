"""Schemathesis against a live gateway's admin API, from the gateway's own ``/openapi.json``."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.core.result import Ok

from helpers import ADMIN_HEADERS
from rolltap.gateway import Gateway

#: examples per operation: enough to try every operation's shapes, bounded for CI
EXAMPLES = 15


def exercise(schema: Any, base_url: str) -> int:
    """Run every operation's generated cases against ``base_url``; how many ran."""
    ran = 0
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            nonlocal ran
            response = case.call(base_url=base_url, headers=ADMIN_HEADERS, timeout=10)
            # no 5xx, statuses, content types and bodies as the document says
            case.validate_response(response)
            ran += 1

        check()
    return ran


async def test_admin_api_conforms_to_its_openapi_document(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    async with http.get(gateway.admin_url + "/openapi.json") as resp:  # no auth
        assert resp.status == 200
        document = await resp.json()
    schema = schemathesis.openapi.from_dict(document)
    # hypothesis and requests block: off the loop, which keeps serving the gateway
    ran = await asyncio.to_thread(exercise, schema, gateway.admin_url)
    assert ran >= len(document["paths"])
