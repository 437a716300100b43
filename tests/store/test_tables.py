"""``sessions list`` and ``runs list`` on an 80-column terminal: every id whole."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from rolltap.events import EventLog
from rolltap.store import Store

CLI = "from rolltap.cli.main import main; main()"


async def _populate(url: str) -> tuple[list[str], list[str]]:
    """Two eval-like runs (uuid ids), sessions with uuid and gateway ids, and a fork."""
    async with await Store.open(url) as store:
        runs = [await store.create_run("nightly eval of a long name"), await store.create_run()]
        sessions = [(await store.create_session(runs[0].id, user="ana")).id]
        gateway_made = await store.create_session(runs[1].id, session_id="ro_3f2a9c0d1e2b4a5c")
        sessions.append(gateway_made.id)
        log = EventLog()
        log.append("note", {"text": "hi"})
        await store.commit(sessions[0], log, status="completed", reward=1.0)
        fork = await store.create_session(runs[1].id, parent=sessions[0], fork_at=1)
        sessions.append(fork.id)
        return [r.id for r in runs], sessions


def _cli(*args: str, columns: int) -> str:
    # the child imports the very rolltap this test does, on a terminal this wide
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CLI, *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= columns, done.stdout
    return done.stdout


def test_ids_are_never_cut_at_80_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tables.db'}"
    run_ids, session_ids = asyncio.run(_populate(url))
    listed = _cli("sessions", "list", "--store", url, columns=80)
    for ident in [*run_ids, *session_ids]:
        assert ident in listed, listed
    assert not re.search(r"[0-9a-f]…", listed), listed  # nothing cut to 7ba5b25…
    assert "completed" in listed  # the status stays
    runs = _cli("runs", "list", "--store", url, columns=80)
    assert all(ident in runs for ident in run_ids), runs
    # one run's sessions: the run is named above the table, each session in full
    one = _cli("sessions", "list", "--run", run_ids[1][:6], "--store", url, columns=80)
    assert f"run {run_ids[1]}" in one and session_ids[1] in one and session_ids[2] in one, one
    # wider: the lesser columns come back, the fork's parent in full
    wide = _cli("sessions", "list", "--store", url, columns=200)
    assert "updated" in wide and "ana" in wide and f"{session_ids[0]}@1" in wide, wide
