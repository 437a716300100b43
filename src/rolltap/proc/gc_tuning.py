"""The cyclic garbage collector's thresholds for a process that hosts a gateway.

Every model call parses its body into Python objects (a 400-message history is some
3,000 dicts and lists, 64 rollouts in flight hold 100,000s), and CPython's defaults
(700, 10, 10) collect the young generation every 700 allocations: the bodies in flight
are traversed again and again and promoted, and the oldest generation, which holds every
recorded event, is walked often. At 64 rollouts x 100 turns that was 44% of the
gateway's CPU (py-spy); collecting the young generation every 20,000 allocations cut it
to 6% and raised throughput 1.3-1.4x (benchmarks/gateway_overhead.py, issue 17). Cycles
are still collected: garbage waits at most 20,000 allocations longer.
"""

from __future__ import annotations

import gc

__all__ = ["GATEWAY_GC_THRESHOLDS", "tune_gc_for_gateway"]

GATEWAY_GC_THRESHOLDS = (20_000, 20, 20)


def tune_gc_for_gateway() -> None:
    """Set :data:`GATEWAY_GC_THRESHOLDS` for this process (its entry point calls it)."""
    gc.set_threshold(*GATEWAY_GC_THRESHOLDS)
