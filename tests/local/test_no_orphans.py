"""No child outlives rolltap: SIGKILL the parent and its children's groups go too."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

from clikit import TASKS
from helpers import require_local_extra
from local.localkit import read_fifo, starts, use_standin, wait_gone
from rolltap.proc import describe_exit

pytestmark = pytest.mark.timeout(60)

#: a parent that starts a shell in its own session, whose background child is a
#: grandchild of the parent, guards the shell's group, prints both pids and waits
_PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    from rolltap.proc import guard, prepare
    shell = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 300 & echo $!; wait"],
        stdout=subprocess.PIPE, start_new_session=True, text=True, preexec_fn=prepare(),
    )
    guard(shell.pid)
    print(shell.pid, shell.stdout.readline().strip(), flush=True)
    time.sleep(300)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_watched_group_dies_with_its_parent(sig: signal.Signals) -> None:
    argv = [sys.executable, "-c", _PARENT]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as parent:
        assert parent.stdout is not None
        shell, grandchild = (int(pid) for pid in parent.stdout.readline().split())
        parent.send_signal(sig)
    try:
        assert wait_gone(shell, 10) and wait_gone(grandchild, 10)
    finally:
        _kill_left(shell, grandchild)


def _kill_left(*pids: int) -> None:
    for pid in pids:
        if not wait_gone(pid, 0):
            os.kill(pid, signal.SIGKILL)


def test_a_released_group_is_left_alone() -> None:
    code = textwrap.dedent(
        """
        import subprocess, sys
        from rolltap.proc import guard, prepare, release
        from rolltap.proc.guard import watchdog_pid
        child = subprocess.Popen(
            ["sleep", "300"], start_new_session=True, preexec_fn=prepare(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        guard(child.pid)
        release(child.pid)
        print(child.pid, watchdog_pid(), flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pid, watchdog = (int(p) for p in out.stdout.split())
    try:
        assert wait_gone(watchdog, 10)  # the parent's exit reached it, and it is done
        os.kill(pid, 0)  # the released child still runs
    finally:
        os.kill(pid, signal.SIGKILL)


def test_exit_descriptions() -> None:
    assert describe_exit(-signal.SIGILL) == "killed by signal SIGILL (illegal instruction)"
    assert describe_exit(-signal.SIGSEGV).startswith("killed by signal SIGSEGV")
    assert describe_exit(0) == "exited with status 0"


def test_a_cmd_harness_and_its_children_die_with_a_killed_eval(tmp_path: Path) -> None:
    """``kill -9`` of ``rolltap eval`` mid-rollout: the ``--cmd`` shell and what it
    started are gone too (the shell tells the test its pids through a FIFO)."""
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "hi"}\n')
    cmd = f"sleep 300 & echo $$ $! > {fifo}; wait"
    argv = [
        sys.executable, "-m", "rolltap", "eval", str(tasks), "--cmd", cmd,
        "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
        "--store", f"sqlite:///{tmp_path / 'runs.db'}",
    ]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            shell, grandchild = (int(pid) for pid in read_fifo(fifo, proc).split())
            proc.kill()
        finally:
            proc.kill()
    try:
        assert wait_gone(shell, 10) and wait_gone(grandchild, 10)
    finally:
        _kill_left(shell, grandchild)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_local_model_dies_with_its_gateway(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sig: signal.Signals
) -> None:
    require_local_extra()  # the weights: the stand-in binary does not read them
    log = use_standin(monkeypatch, tmp_path, "ok")
    argv = [sys.executable, "-m", "rolltap", "gateway"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        try:
            assert "local model:" in proc.stdout.readline()
            ((server, _),) = starts(log)
            proc.send_signal(sig)
            proc.wait(30)
        finally:
            proc.kill()
    assert wait_gone(server, 10)


def test_a_killed_watchdog_is_replaced_with_every_group_it_knew() -> None:
    code = textwrap.dedent(
        """
        import os, signal, subprocess, time
        from rolltap.proc import guard, prepare
        from rolltap.proc.guard import watchdog_pid
        def start():
            child = subprocess.Popen(
                ["sleep", "300"], start_new_session=True, preexec_fn=prepare(),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            guard(child.pid)
            return child.pid
        first = start()
        old = watchdog_pid()
        os.kill(old, signal.SIGKILL)
        os.waitpid(old, 0)
        second = start()  # the write finds the pipe broken: a new watchdog takes both
        print(first, second, watchdog_pid(), flush=True)
        time.sleep(300)
        """
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        first, second, watchdog = (int(p) for p in proc.stdout.readline().split())
        os.kill(second, 0)  # started and running, not killed by the dead watchdog's pipe
        proc.kill()
    try:
        assert wait_gone(first, 10) and wait_gone(second, 10)
    finally:
        _kill_left(first, second, watchdog)


def test_sigterm_to_eval_stops_the_local_model_and_marks_the_rollouts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_local_extra()
    log = use_standin(monkeypatch, tmp_path, "ok")
    called = tmp_path / "called"
    os.mkfifo(called)
    monkeypatch.setenv("STANDIN_CALLED", str(called))
    store = tmp_path / "runs.db"
    argv = [sys.executable, "-m", "rolltap", "eval", TASKS, "--harness", "chat", "-n", "2",
            "--store", f"sqlite:///{store}"]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        try:
            assert read_fifo(called, proc) == "called\n"  # a rollout's call is in flight
            ((server, _),) = starts(log)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 143
        finally:
            proc.kill()
    assert wait_gone(server, 10)
    with closing(sqlite3.connect(store)) as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM rolltap_sessions")]
    assert statuses and "running" not in statuses and "cancelled" in statuses
