"""CPU seconds of this process and its descendants over a block, by kind of process.

Processes come and go during a run (worker processes, Ray actors), so a thread samples
every descendant's ``cpu_times`` and keeps the last reading of each; a process that
ends between two samples loses at most one period of its CPU (its idle shutdown). A
process counts as a worker for the whole block once it has been seen as one.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

import psutil

__all__ = ["TreeCpu"]

#: what a descendant is, from its command line
Classify = Callable[[psutil.Process], str]


def classify(proc: psutil.Process) -> str:
    """``worker`` (a rolltap worker process or a Ray worker actor), ``ray`` (the rest of
    the cluster: GCS, raylets, idle workers), or ``other``."""
    try:
        line = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    if "rolltap.serve.worker.process" in line or "RayWorker" in line:
        return "worker"
    return "ray" if "ray" in line else "other"


class TreeCpu:
    """``with TreeCpu(exclude={sim_pid}) as cpu: ...`` then ``cpu.by_kind()``: CPU
    seconds spent in the block by ``driver`` (this process), ``worker``, ``ray``, ``other``."""

    def __init__(self, exclude: set[int], period: float = 0.5) -> None:
        self.me = psutil.Process()
        self.exclude, self.period = exclude, period
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-cpu", daemon=True)

    def _sample(self, *, first: bool = False) -> None:
        procs = [self.me, *self.me.children(recursive=True)]
        for proc in procs:
            if proc.pid in self.exclude:
                continue
            try:
                times = proc.cpu_times()
                # a Ray worker process starts idle and becomes an actor later: look again
                # until it is one
                if self._kind.get(proc.pid) not in ("driver", "worker"):
                    self._kind[proc.pid] = "driver" if proc.pid == self.me.pid else classify(proc)
            except psutil.Error:
                continue
            seconds = times.user + times.system
            if first:
                self._first[proc.pid] = seconds
            self._last[proc.pid] = seconds

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def __enter__(self) -> TreeCpu:
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for pid, last in self._last.items():
            out[self._kind[pid]] += last - self._first.get(pid, 0.0)
        return dict(out)

    def pids(self, kind: str) -> set[int]:
        return {pid for pid, k in self._kind.items() if k == kind}
