"""The processes a fuzz run attacks: ``rolltap gateway`` and ``rolltap serve``, each a
subprocess (so a crash shows as an exit and RSS is that process's own), in front of an
upstream the caller runs (the simulator)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import aiohttp
import orjson

from rolltap.fuzz.requests import Route
from rolltap.fuzz.run import FuzzTarget
from rolltap.fuzz.wire import RawAnswer, RawRequest

__all__ = [
    "Proc",
    "gateway_after",
    "gateway_process",
    "gateway_routes",
    "gateway_target",
    "serve_after",
    "serve_process",
    "serve_routes",
    "serve_target",
]

ADMIN_TOKEN = "fuzz-admin-token"
SERVE_TOKEN = "fuzz-serve-token"
_URL = re.compile(r"(?:gateway admin API|rolltap serve): (http://\S+)")
#: what the fuzzed processes run with: a short body timeout (stalled bodies answer in
#: 1 s), a 192 KiB body limit (huge bodies reach 413 cheaply) and the failed-auth limit
#: out of the way (the fuzzer sends wrong tokens on purpose; tests/…/test_auth checks it)
FUZZ_ENV = {
    "ROLLTAP_BODY_TIMEOUT_S": "1",
    "ROLLTAP_MAX_BODY_BYTES": str(192 << 10),
    "ROLLTAP_AUTH_FAILURES_PER_MINUTE": "1000000000",
    "COLUMNS": "400",
}


@dataclass
class Proc:
    """A started rolltap process."""

    process: asyncio.subprocess.Process
    url: str
    token: str

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def alive(self) -> bool:
        return self.process.returncode is None


@asynccontextmanager
async def _started(args: list[str], env: dict[str, str], stderr: TextIO, token: str
                   ) -> AsyncIterator[Proc]:  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rolltap", *args,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **FUZZ_ENV, **env},
        stdout=asyncio.subprocess.PIPE, stderr=stderr,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(90):
            while line := (await process.stdout.readline()).decode():
                if match := _URL.search(line):
                    break
            else:
                raise RuntimeError(f"rolltap {args[0]} exited before listening")
        yield Proc(process, match[1], token)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


@asynccontextmanager
async def gateway_process(upstream: str, stderr: TextIO, **env: str) -> AsyncIterator[Proc]:
    """``rolltap gateway`` in front of ``upstream`` (a chat base URL)."""
    args = ["gateway", "--endpoint", upstream, "--model", "sim-model", "--port", "0"]
    async with _started(args, {"ROLLTAP_ADMIN_TOKEN": ADMIN_TOKEN, **env}, stderr,
                        ADMIN_TOKEN) as proc:  # fmt: skip
        yield proc


@asynccontextmanager
async def serve_process(
    upstream: str, workdir: Path, stderr: TextIO, *, allow: list[str], **env: str
) -> AsyncIterator[Proc]:
    """``rolltap serve`` (one worker, SQLite in ``workdir``) allowing only ``allow``."""
    listed = ", ".join(f'"{name}"' for name in allow)
    config = workdir / "serve.toml"
    config.write_text(
        f'[serve]\nworkers = 1\nport = 0\nstore = "sqlite:///{workdir / "serve.db"}"\n'
        f"allow_harness = [{listed}]\nstats_interval_s = 0.5\n"
        # the serve token's failed-auth limit is a setting, not an environment variable
        "auth_failures_per_minute = 1000000000\n\n"
        f'[endpoints.sim]\nbase_url = "{upstream}"\nmodel = "sim-model"\n',
        encoding="utf-8",
    )
    args = ["serve", "--config", str(config)]
    async with _started(args, {"ROLLTAP_SERVE_TOKEN": SERVE_TOKEN, **env}, stderr,
                        SERVE_TOKEN) as proc:  # fmt: skip
        yield proc


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
        "stream": False}  # fmt: skip
MESSAGES = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
            "stream": False}  # fmt: skip
COUNT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "m", "input": "hi", "max_output_tokens": 8, "stream": False}
REGISTER = {"user": "fuzz", "metadata": {"k": "v"}, "limits": {"max_turns": 10**6},
            "sampling": {"temperature": 0}}  # fmt: skip
SUBMIT = {"rollouts": [{"task": {"id": "t1", "prompt": "say hi", "answer": "hi"},
                        "harness": "chat", "limits": {"max_turns": 2}}],
          "run_name": "fuzz"}  # fmt: skip


async def register(http: aiohttp.ClientSession, gateway: Proc) -> dict[str, Any]:
    """A rollout registered through the admin API (its answer: id, urls, secret)."""
    headers = {"Authorization": f"Bearer {gateway.token}"}
    async with http.post(gateway.url + "/rollouts", json={}, headers=headers) as resp:
        assert resp.status == 201, await resp.text()
        rollout: dict[str, Any] = await resp.json()
        return rollout


def gateway_routes(gateway: Proc, rollout: dict[str, Any]) -> list[Route]:
    """Every harness route of ``rollout`` (three dialects) and every admin route."""
    base, key = urlsplit(rollout["base_url"]).path, rollout["api_key"]
    admin = gateway.token
    return [
        Route("chat", "POST", base + "/chat/completions", key, CHAT, 3),
        Route("messages", "POST", base + "/messages", key, MESSAGES, 3),
        Route("count_tokens", "POST", base + "/messages/count_tokens", key, COUNT, 1.5),
        Route("responses", "POST", base + "/responses", key, RESPONSES, 3),
        Route("models", "GET", base + "/models", key),
        Route("unknown", "POST", base + "/embeddings", key, {"input": "x"}, 0.5),
        Route("register", "POST", "/rollouts", admin, REGISTER, 3),
        Route("list", "GET", "/rollouts", admin, None, 0.5),
        Route("events", "GET", f"/rollouts/{rollout['id']}/events?since=0", admin, None),
        Route("delete", "DELETE", "/rollouts/ro_0000000000000000", admin, None, 0.5),
        Route("stats", "GET", "/stats", admin, None, 0.5),
        Route("metrics", "GET", "/metrics", admin, None, 0.5),
        Route("health", "GET", "/health", admin, None, 0.3),
        Route("openapi", "GET", "/openapi.json", admin, None, 0.3),
    ]


def serve_routes(serve: Proc) -> list[Route]:
    """Every route of the serve API."""
    token = serve.token
    return [
        Route("submit", "POST", "/rollouts", token, SUBMIT, 6),
        Route("rollout", "GET", "/rollouts/0123456789abcdef", token),
        Route("cancel", "DELETE", "/rollouts/0123456789abcdef", token),
        Route("cancel_batch", "DELETE", "/batches/0123456789abcdef", token),
        Route("status", "GET", "/status", token),
        Route("metrics", "GET", "/metrics", token, None, 0.5),
        Route("health", "GET", "/health", token, None, 0.3),
        Route("openapi", "GET", "/openapi.json", token, None, 0.3),
    ]


def _admin(proc: Proc) -> dict[str, str]:
    return {"Authorization": f"Bearer {proc.token}"}


async def gateway_target(http: aiohttp.ClientSession, gateway: Proc) -> FuzzTarget:
    """The gateway as a fuzz target: one live rollout (replaced every chunk) and every
    admin route; rollouts a fuzzed registration created are unregistered at once."""
    current = [await register(http, gateway)]

    async def refresh() -> list[Route]:
        async with http.delete(f"{gateway.url}/rollouts/{current[0]['id']}",
                               headers=_admin(gateway)) as resp:  # fmt: skip
            # the fuzzer itself may have deleted it (a DELETE that hit its id)
            assert resp.status in (200, 404), await resp.text()
        current[0] = await register(http, gateway)
        return gateway_routes(gateway, current[0])

    async def after(req: RawRequest, ans: RawAnswer) -> None:
        if ans.status != 201 or b'"api_key"' not in ans.body:
            return
        rollout_id = orjson.loads(ans.body)["id"]
        async with http.delete(f"{gateway.url}/rollouts/{rollout_id}",
                               headers=_admin(gateway)) as resp:  # fmt: skip
            assert resp.status == 200, await resp.text()

    routes = gateway_routes(gateway, current[0])
    return FuzzTarget(gateway.host, gateway.port, gateway.process.pid, routes, after, refresh)


async def gateway_after(http: aiohttp.ClientSession, gateway: Proc) -> dict[str, Any]:
    """After a run: calls in flight once settled (waits up to 15 s for 0) and whether
    a good request is served."""
    intercepts = -1
    async with asyncio.timeout(15):
        while intercepts != 0:
            async with http.get(gateway.url + "/stats", headers=_admin(gateway)) as resp:
                intercepts = (await resp.json())["intercepts"]
            if intercepts:
                await asyncio.sleep(0.1)  # a cut call may still be unwinding
    rollout = await register(http, gateway)
    headers = {"Authorization": f"Bearer {rollout['api_key']}"}
    async with http.post(rollout["base_url"] + "/chat/completions", json=CHAT,
                         headers=headers) as resp:  # fmt: skip
        body = await resp.json()
        good = resp.status == 200 and bool(body["choices"][0]["message"]["content"])
    return {"intercepts": intercepts, "good": good, "alive": gateway.alive}


def serve_target(serve: Proc) -> FuzzTarget:
    """The serve API as a fuzz target."""
    return FuzzTarget(serve.host, serve.port, serve.process.pid, serve_routes(serve))


async def serve_after(http: aiohttp.ClientSession, serve: Proc) -> dict[str, Any]:
    """After a run: rollouts and calls in flight once settled, and whether a good
    submission runs to a completed result."""
    inflight = intercepts = -1
    async with asyncio.timeout(30):
        while inflight or intercepts:
            async with http.get(serve.url + "/status", headers=_admin(serve)) as resp:
                status = await resp.json()
            inflight = status["inflight"]
            # the workers' gateways report calls held on every heartbeat (0.5 s)
            intercepts = sum(w["stats"].get("intercepts", 0) for w in status["workers"])
            if inflight or intercepts:
                await asyncio.sleep(0.1)
    async with http.post(serve.url + "/rollouts", json=SUBMIT, headers=_admin(serve)) as resp:
        lines = [orjson.loads(line) for line in (await resp.read()).splitlines()]
    good = resp.status == 200 and [ln.get("status") for ln in lines if ln["type"] == "result"] == [
        "completed"
    ]
    return {"inflight": inflight, "intercepts": intercepts, "good": good, "alive": serve.alive}
