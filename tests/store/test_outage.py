"""Database outages during an eval: a private server stopped and started, a full disk.

Every server here is private to its test (tests/store/privatedb.py): the machine's shared
PostgreSQL and MariaDB are never stopped.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path

import orjson
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from clikit import arolltap_ok
from rolltap.rollouts import RunResult
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store, upgrade
from rolltap.store.errors import StoreFullError, StoreUnavailableError
from store.outagekit import EXPECTED_KINDS, Outage, assert_every_rollout_once, run_with_outage
from store.privatedb import PrivateServer, private_db, private_postgres

__all__ = ["private_db", "private_postgres"]  # fixtures used by the tests below

N = 240
C = 16


@pytest.mark.timeout(420)
async def test_server_stopped_10s_mid_eval_loses_and_duplicates_nothing(
    private_db: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    await upgrade(private_db.url)
    outage = Outage(private_db, after=60, down_s=10.0)
    result = await run_with_outage(outage, private_db.url, N)
    assert isinstance(result, RunResult), result
    assert result.summary["statuses"] == {"completed": N}
    assert len(result.results) == N  # every rollout counted once
    await assert_every_rollout_once(private_db.url, result.run_id, N)
    # the run went on while the server was down: rollouts ended and gave their places to
    # new ones before their final commits could land (more than c beyond those durable)
    assert outage.admitted_at_start - outage.results_at_start > C
    # progress said so while it was down
    notes = outage.unavailable_notes()
    assert notes and all(n.startswith("store unavailable for ") for n in notes)
    assert any(" commits pending" in n and not n.endswith(" 0 commits pending") for n in notes)
    # the writer reconnected: maybe after the last rollout ended, its commits still pending
    # (progress reports once a second while rollouts run; the run may end before the
    # server is back), so its own log says so rather than the last report
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("rolltap.store")]
    assert any(m.startswith("store writer: reconnected after ") for m in messages), messages


def _unsaved_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("rolltap-unsaved-*.jsonl"))


@pytest.mark.timeout(300)
async def test_store_away_past_the_timeout_stops_and_the_unsaved_file_imports_once(
    private_db: PrivateServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    await upgrade(private_db.url)
    outage = Outage(private_db, after=30, down_s=None)
    error = await run_with_outage(outage, private_db.url, N, timeout_s=3.0)
    assert isinstance(error, StoreUnavailableError), error
    assert error.code == "store_unavailable" and "\n" not in error.message
    files = _unsaved_files(tmp_path)
    assert len(files) == 1 and str(files[0]) in error.message
    run_id = files[0].name.removeprefix("rolltap-unsaved-").removesuffix(".jsonl")
    lines = [orjson.loads(line) for line in files[0].read_bytes().splitlines()]
    assert lines, "nothing unsaved although the server went away mid-run"
    started = {r.session_id for r in outage.results if r.session_id}
    saved_ids = {doc["session"]["id"] for doc in lines}
    assert len(saved_ids) == len(lines)  # one line per session
    assert outage.runner is not None and outage.runner.admitted < N  # admission stopped
    await assert_unsaved_import_once(private_db, files[0], run_id, lines, started)


async def assert_unsaved_import_once(
    server: PrivateServer, path: Path, run_id: str, lines: list[dict[str, object]],
    finished: set[str],
) -> None:  # fmt: skip
    await asyncio.to_thread(server.start)
    first = await arolltap_ok("sessions", "import", str(path), "--store", server.url)
    assert f"imported {len(lines)} session" in first
    again = await arolltap_ok("sessions", "import", str(path), "--store", server.url)
    assert "imported 0 session" in again
    async with await Store.open(server.url) as store:
        for doc in lines:
            session, events = doc["session"], doc["events"]
            assert isinstance(session, dict) and isinstance(events, list)
            stored = await store.events(session["id"])
            assert [(e.seq, e.kind, e.ts) for e in stored] == [
                (e["seq"], e["kind"], e["ts"]) for e in events
            ]
            assert (await store.get_session(session["id"])).status == session["status"]
        # and the rollouts that had finished before the outage are intact
        for session_id in finished - {str(d["session"]["id"]) for d in lines}:  # type: ignore[index]
            kinds = [e.kind for e in await store.events(session_id)]
            assert kinds == EXPECTED_KINDS, session_id
        info = await store.get_run(run_id)
        assert info.n_sessions == len(await store.list_sessions(run=run_id))


@pytest.mark.timeout(300)
async def test_pending_bytes_bound_pauses_admission_while_the_store_is_down(
    private_postgres: PrivateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLLTAP_STORE_PENDING_MAX_BYTES", "1")  # anything pending is too much
    await upgrade(private_postgres.url)
    # slow calls: rollouts in flight when the server stops go on ending during the outage
    outage = Outage(private_postgres, after=C, down_s=5.0)
    result = await run_with_outage(outage, private_postgres.url, 64, c=C, ttft_ms=400)
    assert isinstance(result, RunResult), result
    assert outage.admitted_seen_down >= 0, "the outage was never reported"
    assert outage.admitted_at_start == outage.admitted_seen_down  # nothing admitted while down
    assert result.summary["statuses"] == {"completed": 64}
    await assert_every_rollout_once(private_postgres.url, result.run_id, 64)


@pytest.mark.timeout(300)
async def test_sqlite_full_disk_one_clear_error_and_the_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "full.db"
    url = f"sqlite:///{db}"
    async with await Store.open(url):
        pass  # the schema, then a cap a few dozen rollouts past it
    with sqlite3.connect(db) as conn:
        limit = conn.execute("PRAGMA page_count").fetchone()[0] + 40

    def cap(dbapi_conn: object, _record: object) -> None:
        cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
        cursor.execute(f"PRAGMA max_page_count = {limit}")
        cursor.close()

    event.listen(Engine, "connect", cap)
    try:
        outage = Outage(None, after=10**9, down_s=None)
        error = await run_with_outage(outage, url, N, timeout_s=30.0)
    finally:
        event.remove(Engine, "connect", cap)
    assert isinstance(error, StoreFullError), error
    assert error.code == "store_full" and "\n" not in error.message
    assert str(db) in error.message and "full" in error.message
    assert outage.runner is not None and outage.runner.admitted < N  # admission stopped
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = conn.execute("SELECT count(*) FROM rolltap_sessions").fetchone()[0]
    assert 0 < stored < N
    files = _unsaved_files(tmp_path)
    assert len(files) == 1 and str(files[0]) in error.message
    unsaved = {orjson.loads(line)["session"]["id"] for line in files[0].read_bytes().splitlines()}
    async with await Store.open(url) as store:  # every rollout started: stored, or in the file
        for result in outage.results:
            if result.session_id is not None and result.session_id not in unsaved:
                kinds = [e.kind for e in await store.events(result.session_id)]
                assert kinds == EXPECTED_KINDS, result.session_id


async def _read_until(stream: asyncio.StreamReader, text: str) -> str:
    seen = ""
    while line := (await stream.readline()).decode():
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"{text!r} never came: {seen[-2000:]}")


@pytest.mark.timeout(300)
async def test_cli_eval_says_store_unavailable_then_exits_1(
    private_postgres: PrivateServer, tmp_path: Path
) -> None:
    url = private_postgres.url
    await upgrade(url)
    tasks = tmp_path / "tasks.jsonl"
    await asyncio.to_thread(
        tasks.write_bytes, b"\n".join(orjson.dumps({"prompt": f"p{i}"}) for i in range(400))
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "500"}
    async with Simulator(SimConfig(seed=5, ttft_ms=40)) as sim:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rolltap", "eval", str(tasks), "--harness", "chat",
            "--endpoint", sim.base_url, "--model", "m", "-c", "4", "--store", url,
            "--store-unavailable-timeout", "2", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        head = await _read_until(proc.stderr, "done 20/400")
        await asyncio.to_thread(private_postgres.stop)
        _, rest = await proc.communicate()
    err = head + rest.decode()
    assert proc.returncode == 1, err[-3000:]
    assert "store unavailable for " in err  # the progress said so
    errors = [line for line in err.splitlines() if "[store_unavailable]" in line]
    assert len(errors) == 1 and "rolltap-unsaved-" in errors[0], err[-3000:]
    files = _unsaved_files(tmp_path)
    assert len(files) == 1
    await asyncio.to_thread(private_postgres.start)
    run_id = files[0].name.removeprefix("rolltap-unsaved-").removesuffix(".jsonl")
    async with await Store.open(url) as store:
        stored = (await store.get_run(run_id)).config["run"]
    assert stored["store_unavailable_timeout_s"] == 2.0  # the flag is kept with the run
