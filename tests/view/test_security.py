"""The viewer's token beyond loopback, its cookie, and no credential on any page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from clikit import cli_env
from rolltap.store import Store
from rolltap.view import TOKEN_ENV, ViewConfig, ViewServer
from view.viewkit import start_view, stop_view

SECRET = "sk-view-test-0123456789"


async def _store(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'sec.db'}"
    async with await Store.open(url) as store:
        run = await store.create_run("r", {
            "run": {"store": f"postgresql://u:{SECRET}@db/x", "api_key_env": "OPENAI_API_KEY"},
            "endpoint": {"headers": {"X-Api-Key": SECRET}, "api_key": SECRET},
        })  # fmt: skip
    return url, run.id


async def test_beyond_loopback_every_page_needs_the_token(tmp_path: Path) -> None:
    url, run_id = await _store(tmp_path)
    config = ViewConfig(host="0.0.0.0", port=0)
    token, generated = config.resolved_token()
    assert token and generated
    async with (
        await Store.open(url) as store,
        ViewServer(store, config, token) as server,
        # unsafe: keep cookies of an IP address, as browsers do
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,
    ):
        base = server.url.replace("0.0.0.0", "127.0.0.1")
        for path in ("", f"runs/{run_id}", "api/runs", f"?token={token}x"):
            async with http.get(base + path, allow_redirects=False) as resp:
                assert resp.status == 401, path
                assert token not in await resp.text()
        async with http.get(f"{base}runs/{run_id}?token={token}", allow_redirects=False) as resp:
            assert resp.status == 303
            assert resp.headers["Location"] == f"/runs/{run_id}"  # the token leaves the URL
            cookie = resp.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        async with http.get(f"{base}runs/{run_id}") as resp:  # the cookie now admits it
            page = await resp.text()
            assert resp.status == 200 and "OPENAI_API_KEY" in page
            assert SECRET not in page and token not in page
        async with http.get(f"{base}static/view.css") as resp:
            assert resp.status == 200


async def test_loopback_needs_no_token_unless_one_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ViewConfig().resolved_token() == (None, False)
    monkeypatch.setenv(TOKEN_ENV, "fixed-token")
    assert ViewConfig().resolved_token() == ("fixed-token", False)
    assert ViewConfig(host="::").resolved_token() == ("fixed-token", False)


def test_the_cli_prints_a_generated_token_only_beyond_loopback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    subprocess.run([sys.executable, "-m", "rolltap", "db", "upgrade", "--store", url],
                   check=True, env=cli_env(), capture_output=True)  # fmt: skip
    proc, _ = start_view(url, "--host", "0.0.0.0")
    out = stop_view(proc)
    assert "token: " in out and "set ROLLTAP_VIEW_TOKEN" in out
    proc, _ = start_view(url)
    assert "token" not in stop_view(proc)


def test_a_missing_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "rolltap", "view", "--store", missing, "--port", "0"],
        env=cli_env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("error [") and "no store at" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "none.db").exists()  # read only: nothing created


def test_view_flags_are_config_fields(tmp_path: Path) -> None:
    toml = tmp_path / "view.toml"
    toml.write_text('[view]\nstore = "sqlite:///x.db"\nhost = "0.0.0.0"\nport = 7600\n'
                    'serve = "http://127.0.0.1:8765"\n')  # fmt: skip
    config = ViewConfig.from_toml(toml, port=7601)
    assert (config.store, config.host, config.port, config.serve) == (
        "sqlite:///x.db", "0.0.0.0", 7601, "http://127.0.0.1:8765",
    )  # fmt: skip
