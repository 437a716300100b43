"""No child outlives rolltap: one watchdog process per rolltap process.

Every process group rolltap starts (the local model, ``--cmd`` harnesses) is registered
by the hook :func:`prepare` returns, inside the child before it runs anything, and
recorded with :func:`guard` once started and released with :func:`release` once reaped.
The watchdog holds the read end of a pipe whose write end only this process holds
(the descriptor is close-on-exec, so children never inherit it). When this process
exits, by a signal or ``kill -9`` too, the pipe's EOF makes the watchdog kill every
group still registered. A parent-death signal would reach only the direct child, not
what ``/bin/sh -c`` started under it; killing the group reaches all of it.

>>> import subprocess
>>> child = subprocess.Popen(["sleep", "60"], start_new_session=True, preexec_fn=prepare())
>>> guard(child.pid)
>>> child.kill(); _ = child.wait(); release(child.pid)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["guard", "prepare", "release", "watchdog_pid"]

_SCRIPT = Path(__file__).with_name("_watchdog.py")


class _Watchdog:
    """The process-wide watchdog, started on first use and again after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1  # the process that owns ``_fd``
        self._fd = -1
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()

    def _start(self) -> None:
        read_end, write_end = os.pipe()  # both close-on-exec
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_SCRIPT)],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._fd, self._pid = write_end, os.getpid()
        for pgid in self._groups:  # a restarted watchdog takes over the known groups
            os.write(self._fd, b"+%d\n" % pgid)

    def _send(self, line: bytes) -> None:
        if self._pid != os.getpid():
            self._forked()
        if self._fd < 0:
            self._start()
        try:
            os.write(self._fd, line)
        except BrokenPipeError:
            # the watchdog died (killed by hand): start another with every known group
            os.close(self._fd)
            self._fd = -1
            self._start()

    def _forked(self) -> None:
        # a forked child inherits the parent's descriptor and groups, neither its own
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._proc, self._groups = -1, None, set()

    def prepare(self) -> int:
        with self._lock:
            if self._pid != os.getpid():
                self._forked()
            if self._fd < 0:
                self._start()
            return self._fd

    def guard(self, pgid: int) -> None:
        with self._lock:
            self._send(b"+%d\n" % pgid)
            self._groups.add(pgid)

    @property
    def pid(self) -> int | None:
        owned = self._proc is not None and self._pid == os.getpid()
        return self._proc.pid if owned and self._proc is not None else None

    def release(self, pgid: int) -> None:
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(b"-%d\n" % pgid)


_WATCHDOG = _Watchdog()


def prepare() -> Callable[[], None]:
    """Start the watchdog if it is not running and return a ``preexec_fn`` for a child
    started with ``start_new_session=True``: it registers the child's group from inside
    the child, before the child runs anything, so not even a ``kill -9`` of rolltap in
    the instant after the fork leaves it behind. Call :func:`guard` once it started."""
    fd = _WATCHDOG.prepare()

    def register_group() -> None:
        # runs between fork and exec: one system call, nothing that could take a lock
        os.write(fd, b"+%d\n" % os.getpid())

    return register_group


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
