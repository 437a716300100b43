"""Process memory hygiene and readings for long-running processes (every gateway trims).

A worker that churns through big requests frees most of what it allocated, but glibc
keeps freed pages in its arenas, so RSS ratchets up to several times the live set
(seed 004: ×3). :class:`Trimmer` hands those pages back with ``malloc_trim(0)`` on a
worker thread: the call can take milliseconds on a fragmented heap, and on the event
loop that would stall heartbeats. Nothing here runs ``gc.collect()``: a full collection
of a fat heap is itself a multi-second stall.

>>> readings().rss > 0
True
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = ["ProcessReadings", "TrimReport", "Trimmer", "peak_rss", "readings"]

_PROC_SELF = Path("/proc/self")


@dataclass(frozen=True, slots=True)
class ProcessReadings:
    """One look at this process: resident memory (now and its peak), descriptors and
    threads."""

    rss: int
    open_files: int
    sockets: int
    threads: int
    peak_rss: int = 0


def _proc_readings() -> ProcessReadings:
    page = os.sysconf("SC_PAGE_SIZE")
    rss = int((_PROC_SELF / "statm").read_text().split()[1]) * page
    fds = list((_PROC_SELF / "fd").iterdir())
    sockets = 0
    for fd in fds:
        try:
            sockets += os.readlink(fd).startswith("socket:")
        except OSError:
            continue  # closed between the listing and the readlink: not open any more
    threads = sum(1 for _ in (_PROC_SELF / "task").iterdir())
    return ProcessReadings(
        rss=rss, open_files=len(fds), sockets=sockets, threads=threads, peak_rss=peak_rss()
    )


def readings() -> ProcessReadings:
    """This process's readings, from ``/proc`` where there is one (else psutil).

    Blocking (it lists descriptors): call it through ``asyncio.to_thread`` on a loop.
    """
    if _PROC_SELF.exists():
        return _proc_readings()
    proc = psutil.Process()
    return ProcessReadings(
        rss=proc.memory_info().rss,
        open_files=proc.num_fds(),
        sockets=0,  # psutil can only count sockets by walking every connection
        threads=proc.num_threads(),
        peak_rss=peak_rss(),
    )


def peak_rss() -> int:
    """The most memory (bytes) this process has held resident since it started.

    ``/proc/self/status``'s ``VmHWM`` where there is one: ``ru_maxrss`` survives
    ``fork`` + ``exec``, so a worker process would report its parent's RSS at the fork
    as its own peak. Blocking (it reads ``/proc``).
    """
    try:
        kb = {
            line.split(":")[0]: int(line.split()[1])
            for line in (_PROC_SELF / "status").read_text().splitlines()
            if line.startswith(("VmHWM:", "VmRSS:"))
        }
        if kb:
            # the kernel raises VmHWM lazily: it can lag the current VmRSS by a few pages
            return max(kb.values()) * 1024
    except OSError:
        pass  # no /proc (macOS): getrusage, in bytes there
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss * 1024 if os.uname().sysname == "Linux" else maxrss


@dataclass(frozen=True, slots=True)
class TrimReport:
    """What one trim did and where it ran (``thread`` is never the loop's thread)."""

    released: bool
    seconds: float
    thread: int
    loop_thread: int


def _load_malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None  # not glibc (musl, macOS): there is no malloc_trim to call
    if not hasattr(libc, "malloc_trim"):
        return None
    trim = libc.malloc_trim
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def call(pad: int) -> int:
        # ctypes releases the GIL for the call: other threads (and the loop) keep running
        return int(trim(pad))

    return call


class Trimmer:
    """Returns freed allocator pages to the OS, off the event loop.

    ``available`` is False where the C library has no ``malloc_trim`` (then
    :meth:`trim` does nothing but report). ``count`` and ``last`` describe the trims so
    far, for the worker's stats.
    """

    def __init__(self) -> None:
        self._fn = _load_malloc_trim()
        self.count = 0
        self.last: TrimReport | None = None
        #: set after every trim (a test or a benchmark waits on it)
        self.trimmed = asyncio.Event()

    @property
    def available(self) -> bool:
        return self._fn is not None

    def _trim_blocking(self) -> tuple[bool, float, int]:
        started = time.perf_counter()
        released = bool(self._fn(0)) if self._fn is not None else False
        return released, time.perf_counter() - started, threading.get_ident()

    async def trim(self) -> TrimReport:
        """Run ``malloc_trim(0)`` on a worker thread and report where and how long."""
        loop_thread = threading.get_ident()
        released, seconds, thread = await asyncio.to_thread(self._trim_blocking)
        self.count += 1
        self.last = TrimReport(released, seconds, thread, loop_thread)
        self.trimmed.set()
        return self.last

    async def trim_forever(self, interval: float) -> None:
        """Trim every ``interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.trim()
