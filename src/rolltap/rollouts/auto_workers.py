"""How many worker processes ``workers = "auto"`` (the default) runs a run on.

One process runs every rollout's harness, gateway and store writes on one core: from about
a thousand rollouts at once that core is the bottleneck (docs/benchmarks.md, "Scale": one
process 1.66 × ideal at 2,048 on two cores, two workers 1.29–1.41). So a run of at least
:data:`AUTO_MIN_C` at once, on a machine with two cores or more, goes to one worker
process for every :data:`AUTO_C_PER_WORKER` rollouts at once, at most one per core; a
smaller run, or one core, stays in this process, where it starts fastest.

>>> auto_workers(8, cores=16), auto_workers(2048, cores=2), auto_workers(4096, cores=64)
(0, 2, 8)
"""

from __future__ import annotations

import os

__all__ = ["AUTO_C_PER_WORKER", "AUTO_MIN_C", "auto_workers", "available_cores"]

#: rollouts at once from which ``auto`` spreads a run over worker processes
AUTO_MIN_C = 1024
#: rollouts at once that ``auto`` gives each worker process
AUTO_C_PER_WORKER = 512


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_workers(c: int, *, cores: int | None = None) -> int:
    """Worker processes for ``c`` rollouts at once on ``cores`` cores (default: this
    machine's); 0: run in this process."""
    cores = available_cores() if cores is None else cores
    if c < AUTO_MIN_C or cores < 2:
        return 0
    return max(2, min(cores, c // AUTO_C_PER_WORKER))
