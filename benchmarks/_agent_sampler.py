"""Peak RSS of agent processes (each with its process tree) and of this process, sampled
on a thread whose own CPU time is kept apart, so it can be taken out of this process's."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import psutil

__all__ = ["AgentSampler", "is_agent"]

MB = 1024 * 1024


def is_agent(name: str) -> Callable[[psutil.Process], bool]:
    """Whether a child of this process is an agent: its executable's name starts with
    ``name`` (Claude Code 2.1 is a native ``claude.exe``, not node)."""

    def check(proc: psutil.Process) -> bool:
        try:
            return proc.name().startswith(name)
        except psutil.Error:
            return False

    return check


class AgentSampler:
    """``with AgentSampler(agent=is_agent("claude")) as s: ...``: every ``period`` s, this
        process's RSS and, per agent (a direct child that ``agent`` accepts), the RSS summed
        over its process tree (its Bash tools' shells included); the maxima of each, and the
    most RSS and PSS all agents held at once (RSS counts the pages they share, Claude Code's
    mapped binary among them, once in each; PSS splits each shared page among its sharers, so
    the agents' PSS sum is what they took from the machine).

        ``thread_cpu_s``: the CPU the sampling has spent so far (updated after each sample),
        to subtract from this process's.
    """

    def __init__(self, agent: Callable[[psutil.Process], bool], period: float = 0.25) -> None:
        self.me = psutil.Process()
        self.agent, self.period = agent, period
        self.rolltap_peak = 0
        #: this process's RSS when sampling began (bytes): the wave's growth is the peak less it
        self.rolltap_start = self.me.memory_info().rss
        #: agent pid → its tree's peak RSS (bytes)
        self.agent_peak: dict[int, int] = defaultdict(int)
        #: the most RSS all agents held at once, and an estimate of the memory they took
        #: (bytes): each one's private pages plus the largest file-backed share once
        self.agents_total_peak = 0
        self.agents_own_peak = 0
        self.thread_cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-rss", daemon=True)

    def _trees(self) -> dict[int, list[psutil.Process]]:
        """Each agent's pid → the processes of its tree, itself included. One scan of the
        process table for all (``children(recursive=True)`` per agent scans it each time:
        at 32 agents that was most of the sampler's CPU)."""
        parent: dict[int, int] = {}
        found: dict[int, psutil.Process] = {}
        for proc in self.me.children(recursive=True):
            with contextlib.suppress(psutil.Error):  # ended while we looked
                parent[proc.pid] = proc.ppid()
                found[proc.pid] = proc
        trees: dict[int, list[psutil.Process]] = defaultdict(list)
        for pid, proc in found.items():
            root = pid
            while parent.get(root, self.me.pid) != self.me.pid:
                root = parent[root]
            if root in found:
                trees[root].append(proc)
        return {root: procs for root, procs in trees.items() if self.agent(found[root])}

    def sample(self) -> None:
        """One reading of every agent's tree and of this process (``memory_info``: one
        read of ``statm`` each; PSS would cost a walk of each page table, ~14 ms per
        Claude Code, half a second of a core per sample at 32)."""
        self.rolltap_peak = max(self.rolltap_peak, self.me.memory_info().rss)
        now_rss = now_private = now_shared = 0
        for root, procs in self._trees().items():
            rss = 0
            for proc in procs:
                try:
                    mem = proc.memory_info()
                except psutil.Error:
                    continue  # ended while we looked
                rss += mem.rss
                now_private += mem.rss - mem.shared
                now_shared = max(now_shared, mem.shared)
            self.agent_peak[root] = max(self.agent_peak[root], rss)
            now_rss += rss
        self.agents_total_peak = max(self.agents_total_peak, now_rss)
        self.agents_own_peak = max(self.agents_own_peak, now_private + now_shared)

    def _run(self) -> None:
        start = time.thread_time()
        while not self._stop.wait(self.period):
            self.sample()
            self.thread_cpu_s = time.thread_time() - start

    def __enter__(self) -> AgentSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def agent_peaks_mb(self) -> list[float]:
        """Each agent's peak RSS (MB), ascending."""
        return sorted(v / MB for v in self.agent_peak.values())
