"""What the gateway itself costs a call: its *overhead*, the call's time outside the
upstream's window and outside any wait for a slot or a pause.

A call's ``timing`` (in its response event) holds ``upstream_ms``, from the request
leaving for the upstream to the upstream's last byte read, ``waited_ms`` (held by a
pause — a token completion's parts held between a cut and the resume too, left out
of ``upstream_ms`` — or queued for a slot on a bounded endpoint or replica) and
``gateway_ms``: the time from the request's arrival (before its body is read) to the
answer recorded, less those two. A streamed answer's chunks are relayed inside the
upstream's window, so their handling is not counted; what is counted is the work before
the request leaves (reading, parsing and checking the body, translation, the request
event, the pool lease) and after the upstream's last byte (the last frames, recording the
answer).

:class:`Overhead` keeps the gateway's overheads as a Prometheus histogram
(``rolltap_gateway_overhead_seconds``) and the last :data:`RECENT` of them for the
percentiles ``/stats`` reports.

>>> seen = Overhead()
>>> for ms in (0.2, 0.3, 4.0):
...     seen.record(ms / 1000)
>>> seen.as_dict()["p50_ms"], seen.as_dict()["count"]
(0.3, 3)
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import HistogramMetricFamily

from rolltap.results.confidence import percentile

__all__ = ["BUCKETS_S", "RECENT", "Overhead", "overhead_metric"]

#: the histogram's upper bounds (seconds), +Inf after them
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
#: how many of the latest overheads the percentiles are taken over
RECENT = 4096


@dataclass(slots=True)
class Overhead:
    """The gateway's per-call overheads: bucket counts, their sum, the latest ones."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_S) + 1))
    sum_s: float = 0.0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))

    def record(self, seconds: float) -> None:
        """One call's overhead (O(log buckets); the hot path)."""
        self.counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self.sum_s += seconds
        self.recent.append(seconds)

    def as_dict(self) -> dict[str, Any]:
        """``{"count", "sum_s", "buckets", "p50_ms", "p99_ms"}``: the percentiles over the
        latest :data:`RECENT` calls (None before the first)."""
        latest = list(self.recent)
        p50, p99 = percentile(latest, 50), percentile(latest, 99)
        return {
            "count": sum(self.counts), "sum_s": self.sum_s, "buckets": list(self.counts),
            "p50_ms": None if p50 is None else round(p50 * 1000, 3),
            "p99_ms": None if p99 is None else round(p99 * 1000, 3),
        }  # fmt: skip


def overhead_metric(parts: Iterable[Mapping[str, Any]]) -> HistogramMetricFamily:
    """``rolltap_gateway_overhead_seconds`` from one or more :meth:`Overhead.as_dict`
    (a service's workers: their buckets summed)."""
    counts, total = [0] * (len(BUCKETS_S) + 1), 0.0
    for part in parts:
        buckets = part.get("buckets")
        if isinstance(buckets, list) and len(buckets) == len(counts):
            counts = [a + int(b) for a, b in zip(counts, buckets, strict=True)]
            total += float(part.get("sum_s") or 0.0)
    cumulative, running = [], 0
    for bound, count in zip([*map(str, BUCKETS_S), "+Inf"], counts, strict=True):
        running += count
        cumulative.append((bound, running))
    return HistogramMetricFamily(
        "rolltap_gateway_overhead_seconds",
        "what the gateway itself added to each answered call (its time outside the upstream's"
        " window and outside waits for a slot or a pause)",
        buckets=cumulative, sum_value=total,
    )  # fmt: skip
