"""Helpers the tests share: drive the gateway as a user would."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import openai
import pytest

from rolltap.errors import ConfigError
from rolltap.gateway import Gateway

ADMIN_TOKEN = "test-admin-token"
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

#: the ``make_gateway`` fixture: keyword settings in, a started gateway out
GatewayFactory = Callable[..., Awaitable[Gateway]]


async def register(http: aiohttp.ClientSession, gateway: Gateway, **body: Any) -> dict[str, Any]:
    """Register a rollout through the admin API, as a user would."""
    async with http.post(
        gateway.admin_url + "/rollouts",
        json=body or None,
        headers=ADMIN_HEADERS,
    ) as resp:
        assert resp.status == 201, await resp.text()
        data: dict[str, Any] = await resp.json()
        return data


async def events(
    http: aiohttp.ClientSession, gateway: Gateway, rollout_id: str, *, since: int = 0
) -> list[dict[str, Any]]:
    async with http.get(
        f"{gateway.admin_url}/rollouts/{rollout_id}/events",
        params={"since": str(since)},
        headers=ADMIN_HEADERS,
    ) as resp:
        assert resp.status == 200, await resp.text()
        data = await resp.json()
        result: list[dict[str, Any]] = data["events"]
        return result


def openai_client(rollout: dict[str, Any], **kwargs: Any) -> openai.AsyncOpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(
        base_url=rollout["openai_base_url"], api_key=rollout["api_key"], **kwargs
    )


async def settle(predicate: Callable[[], bool], *, spins: int = 10_000) -> None:
    """Yield to the event loop until ``predicate()`` holds (other tasks make it true).

    For state changed by tasks already running on this loop (a handler unwinding, a
    reaper closing a server): it first only lets them run; if that is not enough (a
    request still in a socket), it keeps looking for up to ~10 s before failing.
    """
    for _ in range(spins):
        if predicate():
            return
        await asyncio.sleep(0)
    # Still not: what makes it true is waiting on a socket (a request in transit) that a
    # loaded machine has not delivered yet. Keep watching, without asserting on time.
    for _ in range(2_000):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never held")


def require_local_extra() -> None:
    """Skip unless the ``local`` extra (llama-server and the Gemma weights) is installed;
    under CI, which installs it, its absence fails instead."""
    from rolltap.local.model import gguf_path, server_binary

    try:
        server_binary()
        gguf_path()
    except ConfigError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"the 'local' extra is not installed: {exc.message}")


#: the agent CLIs' npm packages (``.ci/run`` installs them at pinned versions)
AGENT_PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}


def require_agent(binary: str) -> str:
    """The real agent CLI's path (``claude`` or ``codex``); skips without it, except under
    CI, which installs it (its absence fails instead)."""
    import shutil

    found = shutil.which(binary)
    if found is None:
        message = f"{binary} is not installed (npm install -g {AGENT_PACKAGES[binary]})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI=true installs it")
        pytest.skip(message)
    return found
