"""The event loop rolltap's processes run on: uvloop by default where installed,
``ROLLTAP_LOOP=asyncio`` opts out, a typo is a one-line error before anything runs."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect

import pytest

from clikit import TASKS, argv, cli_env
from rolltap.errors import ConfigError
from rolltap.proc.loop import LOOP_ENV, loop_name, run

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop is not installed on this platform")
def test_uvloop_by_default_and_asyncio_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert (loop_name(), run(_loop_module())) == ("uvloop", "uvloop")
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    assert (loop_name(), run(_loop_module())) == ("asyncio", "asyncio")
    monkeypatch.setenv(LOOP_ENV, " UVLOOP ")
    assert run(_loop_module()) == "uvloop"


def test_a_typo_is_refused_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, "uvlopp")
    main = _loop_module()
    with pytest.raises(ConfigError, match="ROLLTAP_LOOP='uvlopp': use one of auto, uvloop"):
        run(main)
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED  # closed, never run


async def test_the_cli_says_so_in_one_line() -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv("eval", TASKS, "--endpoint", "http://127.0.0.1:1/v1"),
        env=cli_env(**{LOOP_ENV: "fast"}), stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert err.decode().splitlines() == [
        "error [invalid_config] ROLLTAP_LOOP='fast': use one of auto, uvloop, asyncio "
        "(auto: uvloop if installed)"
    ]
