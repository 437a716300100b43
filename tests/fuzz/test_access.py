"""Who may run code, and who may try: the serve allowlist, throttled authentication,
constant-time token checks, the body timeout, and the OpenAPI documents' coverage."""

from __future__ import annotations

import ast
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from helpers import ADMIN_HEADERS, GatewayFactory, register
from rolltap.config import EndpointConfig
from rolltap.errors import AuthRateLimitedError, HarnessNotAllowedError
from rolltap.fuzz import Mode, RawRequest, send
from rolltap.gateway.harness import PREFIX
from rolltap.http.auth import AuthThrottle
from rolltap.openapi import admin_document, serve_document
from rolltap.serve import RolloutSpec, ServeConfig, Service
from rolltap.serve.supervisor.admission import check_batch
from rolltap.serve.supervisor.http_api import SubmitRequest, build_app

SRC = Path(__file__).parents[2] / "src" / "rolltap"
EP = [EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m")]


def _spec(**fields: object) -> RolloutSpec:
    return RolloutSpec(task={"id": "t", "prompt": "p"}, **fields)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.org"])
def test_off_loopback_only_builtins_and_listed_code_run(host: str) -> None:
    config = ServeConfig(endpoints=EP, host=host, allow_harness=["pkg.mod:agent", "python a.py"])
    assert config.restricts_code
    check_batch(config, [_spec(), _spec(harness="tool-agent"), _spec(harness="pkg.mod:agent"),
                         _spec(cmd="python a.py"), _spec(rewards=["exact", "numeric=2"])],
                closed=False)  # fmt: skip
    refused = [_spec(harness="os:system"), _spec(cmd="rm -rf /"), _spec(rewards=["os:getcwd"]),
               _spec(harness="pkg.mod:agent", rewards=["contains", "evil:reward"])]  # fmt: skip
    for spec in refused:
        with pytest.raises(HarnessNotAllowedError) as info:
            check_batch(config, [_spec(), spec], closed=False)
        assert info.value.status == 403 and "rollouts[1]" in info.value.message
    bare = ServeConfig(endpoints=EP, host=host)
    with pytest.raises(HarnessNotAllowedError):
        check_batch(bare, [_spec(harness="pkg.mod:agent")], closed=False)


def test_on_loopback_a_given_list_is_still_enforced() -> None:
    open_config = ServeConfig(endpoints=EP, host="127.0.0.1")
    assert not open_config.restricts_code
    check_batch(open_config, [_spec(harness="pkg.mod:agent", cmd="x")], closed=False)
    listed = ServeConfig(endpoints=EP, host="::1", allow_harness=["pkg.mod:agent"])
    with pytest.raises(HarnessNotAllowedError):
        check_batch(listed, [_spec(harness="other:agent")], closed=False)


def test_allow_harness_reads_from_the_serve_table(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    path.write_text('[serve]\nhost = "0.0.0.0"\nallow_harness = ["a.b:c"]\n\n'
                    '[endpoints.x]\nbase_url = "http://h/v1"\nmodel = "m"\n')  # fmt: skip
    assert ServeConfig.from_toml(path).allow_harness == ["a.b:c"]


def test_throttle_counts_a_minute_per_key_and_stays_bounded() -> None:
    now = [0.0]
    throttle = AuthThrottle(limit=10, max_peers=100, clock=lambda: now[0])
    for _ in range(10):
        throttle.check("peer")
        throttle.failed("peer")
    with pytest.raises(AuthRateLimitedError) as info:
        throttle.check("peer")
    assert info.value.status == 429 and info.value.retry_after == pytest.approx(60.0)
    throttle.check("other")  # another peer is not affected
    now[0] = 60.5
    throttle.check("peer")  # the failures left the window
    for i in range(10_000):
        throttle.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(throttle) == 100


async def test_eleventh_failed_admin_login_is_429_even_with_the_right_token(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway()
    bad = {"Authorization": "Bearer wrong"}
    for _ in range(10):
        async with http.get(gateway.admin_url + "/stats", headers=bad) as resp:
            assert resp.status == 401
    for headers in (bad, ADMIN_HEADERS):
        async with http.get(gateway.admin_url + "/stats", headers=headers) as resp:
            body = await resp.json()
            assert (resp.status, body["error"]["code"]) == (429, "auth_rate_limited")
            assert int(resp.headers["Retry-After"]) >= 59


async def test_a_stale_rollout_secret_locks_out_only_that_rollout(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway()
    stale, other = await register(http, gateway), await register(http, gateway)
    for _ in range(11):
        async with http.get(stale["base_url"] + "/models", headers={"x-api-key": "no"}) as resp:
            last = resp.status
    assert last == 429
    async with http.get(other["base_url"] + "/models",
                        headers={"x-api-key": other["api_key"]}) as resp:  # fmt: skip
        assert resp.status == 200


async def test_a_body_that_stalls_is_408(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(body_timeout_s=0.3)
    rollout = await register(http, gateway)
    url = urlsplit(rollout["base_url"])
    req = RawRequest(b"POST", (url.path + "/chat/completions").encode(),
                     [(b"Authorization", b"Bearer " + rollout["api_key"].encode())],
                     b'{"messages": [{"role": "user", "content": "hi"}]}', Mode.STALL)  # fmt: skip
    answer = await send(url.hostname or "", url.port or 0, req, timeout_s=10)
    assert answer is not None and answer.status == 408
    assert b'"code":"request_timeout"' in answer.body
    assert gateway.snapshot()["intercepts"] == 0


def _routes(app: web.Application) -> set[tuple[str, str]]:
    return {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
        and not route.resource.canonical.startswith(PREFIX.split("{")[0])
    }  # fmt: skip


def _documented(doc: dict[str, object]) -> set[tuple[str, str]]:
    paths = doc["paths"]
    assert isinstance(paths, dict)
    return {(method, path) for path, ops in paths.items() for method in ops}


async def test_admin_openapi_documents_exactly_the_admin_routes(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway()
    app = gateway.servers[0].app
    assert _routes(app) == _documented(admin_document())
    async with http.get(gateway.admin_url + "/openapi.json") as resp:  # no token
        assert resp.status == 200 and (await resp.json())["openapi"] == "3.1.0"


def test_serve_openapi_documents_exactly_the_serve_routes() -> None:
    app = build_app(Service(ServeConfig(endpoints=EP, token="t")))
    assert _routes(app) == _documented(serve_document(SubmitRequest))


def test_every_credential_comparison_is_constant_time() -> None:
    """No ``==``/``!=`` on a name holding a token or secret in the servers' code."""
    offenders = []
    for path in [*SRC.glob("gateway/*.py"), *SRC.glob("serve/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                isinstance(op, ast.Eq | ast.NotEq) for op in node.ops
            ):
                # (an environment variable's *name*, like TOKEN_ENV, is no credential)
                names = ast.unparse(node).lower().replace("token_env", "")
                if ("token" in names and "tokens" not in names) or "secret" in names:
                    offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
