"""No child outlives rolltap: one watchdog process per rolltap process.

Every process group rolltap starts (the local model, ``--cmd`` harnesses) is registered
by the hook :func:`prepare` returns, inside the child before it runs anything, and
recorded with :func:`guard` once started; :func:`release` forgets it once reaped. The
watchdog holds one end of a socket pair whose other end only this process holds (it
is close-on-exec, so children never inherit it). When this process exits, by a signal
or ``kill -9`` too, the EOF makes the watchdog kill every group still registered. A
parent-death signal would reach only the direct child, not what ``/bin/sh -c`` started
under it; killing the group reaches all of it.

>>> import subprocess
>>> child = subprocess.Popen(["sleep", "60"], start_new_session=True, preexec_fn=prepare())
>>> guard(child.pid)
>>> child.kill(); _ = child.wait(); release(child.pid)
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["guard", "prepare", "release", "watchdog_pid"]

_SCRIPT = Path(__file__).with_name("_watchdog.py")


class _Watchdog:
    """The process-wide watchdog, started on first use, again after a fork, and again
    if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = -1  # the pid that started ``_proc`` and holds ``_sock``
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()

    def _running(self) -> socket.socket:
        """The socket to a live watchdog of this process, starting one if needed."""
        if self._owner != os.getpid():  # forked: the parent's watchdog is not ours
            self._sock, self._proc, self._groups = None, None, set()
        if self._sock is not None and self._proc is not None and self._proc.poll() is None:
            return self._sock
        if self._sock is not None:
            self._sock.close()
        ours, theirs = socket.socketpair()
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_SCRIPT)],
                stdin=theirs.fileno(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        self._sock, self._owner = ours, os.getpid()
        for pgid in self._groups:  # a new watchdog takes over every known group
            ours.sendall(b"+%d\n" % pgid)
        return ours

    def _send(self, line: bytes) -> None:
        try:
            self._running().sendall(line)
        except BrokenPipeError:  # it died since the check: once more, with a new one
            self._running().sendall(line)

    def prepare(self) -> Callable[[], None]:
        with self._lock:
            sock = self._running()

        def register_group() -> None:
            # Between fork and exec: one system call. MSG_NOSIGNAL: a dead watchdog
            # must not kill the child with SIGPIPE; guard() then registers it anew.
            try:
                sock.send(b"+%d\n" % os.getpid(), socket.MSG_NOSIGNAL)
            except OSError:
                return

        return register_group

    def guard(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send(b"+%d\n" % pgid)

    def release(self, pgid: int) -> None:
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(b"-%d\n" % pgid)

    @property
    def pid(self) -> int | None:
        owned = self._proc is not None and self._owner == os.getpid()
        return self._proc.pid if owned and self._proc is not None else None

    def close(self) -> None:
        """At exit: EOF to the watchdog (it kills what is still registered), then reap it."""
        with self._lock:
            proc, sock = self._proc, self._sock
            if proc is None or sock is None or self._owner != os.getpid():
                return
            self._proc, self._sock = None, None
        sock.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_WATCHDOG = _Watchdog()
atexit.register(_WATCHDOG.close)


def prepare() -> Callable[[], None]:
    """Start the watchdog if it is not running and return a ``preexec_fn`` for a child
    started with ``start_new_session=True``: it registers the child's group from inside
    the child, before the child runs anything, so not even a ``kill -9`` of rolltap in
    the instant after the fork leaves it behind. Call :func:`guard` once it started."""
    return _WATCHDOG.prepare()


def guard(pgid: int) -> None:
    """Kill process group ``pgid`` when this process exits, however it exits (a child
    started with :func:`prepare`'s hook is registered already; this records it)."""
    _WATCHDOG.guard(pgid)


def release(pgid: int) -> None:
    """Stop guarding ``pgid`` (its group is gone); unknown groups are ignored."""
    _WATCHDOG.release(pgid)


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog; ``None`` until something is guarded."""
    return _WATCHDOG.pid
