"""Helpers for local-model and child-process tests: a stand-in llama-server binary and
waiting for a process to exit (on its pidfd: an event, not a poll)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

STANDIN = Path(__file__).with_name("standin.py")


def standin_binary(tmp_path: Path) -> Path:
    """An executable that runs :mod:`standin` under this interpreter."""
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    binary.chmod(0o755)
    return binary


def use_standin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mode: str) -> Path:
    """Point ``ROLLTAP_LLAMA_SERVER`` at the stand-in in ``mode``; returns its start log."""
    log = tmp_path / "starts.log"
    monkeypatch.setenv("ROLLTAP_LLAMA_SERVER", str(standin_binary(tmp_path)))
    monkeypatch.setenv("STANDIN_MODE", mode)
    monkeypatch.setenv("STANDIN_LOG", str(log))
    return log


def starts(log: Path) -> list[tuple[int, list[str]]]:
    """(pid, argv) of every start the stand-in logged."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        pid, *argv = line.split()
        out.append((int(pid), argv))
    return out


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until process ``pid`` has exited; False if it still runs after ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def read_fifo(fifo: Path, proc: subprocess.Popen[Any] | int, timeout: float = 50) -> str:
    """What a writer puts in ``fifo`` (one write, then it closes it), failing at once if
    ``proc`` (a child, or any pid) exits first: its exit ends the wait as the write would."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # no writer yet: returns at once
    exited = os.pidfd_open(proc if isinstance(proc, int) else proc.pid)
    try:
        # Linux reports a FIFO readable only once a writer has written (or come and gone)
        ready, _, _ = select.select([fd, exited], [], [], timeout)
        if fd not in ready:
            raise AssertionError(f"no write to {fifo}: its writer's process exited first")
        with os.fdopen(os.dup(fd), "rb", buffering=0) as reader:
            chunks: list[bytes] = []
            while True:
                select.select([fd], [], [], timeout)
                data = reader.read()  # None: nothing yet; b"": the writer closed it
                if data == b"":
                    return b"".join(chunks).decode()
                if data:
                    chunks.append(data)
    finally:
        os.close(fd)
        os.close(exited)
