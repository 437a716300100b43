"""Prometheus exposition of the service: totals, and each worker's latest heartbeat.

Read only when scraped, from :meth:`Supervisor.status`, in a private registry. Counts a
worker's gateway keeps (its heartbeat's ``totals``) are summed over the workers under the
gateway's own metric names (``rolltap_token_drift_total``,
``rolltap_dropped_fields_total{field}``); a restarted worker's count
starts again from 0 (a counter reset, as Prometheus's ``rate`` expects of one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rolltap.gateway.overhead import overhead_metric

__all__ = ["render_metrics"]

#: per-worker gauges: heartbeat field → (metric suffix, help, scale)
_WORKER_GAUGES: dict[str, tuple[str, str, float]] = {
    "rss": ("rss_bytes", "resident memory", 1.0),
    "peak_rss": ("peak_rss_bytes", "the most resident memory the worker ever held", 1.0),
    "open_files": ("open_files", "open file descriptors", 1.0),
    "sockets": ("sockets", "open sockets", 1.0),
    "threads": ("threads", "threads", 1.0),
    "inflight": ("inflight", "rollouts in flight", 1.0),
    "intercepts": ("intercepts", "model calls held by the gateway", 1.0),
    "loop_lag_ms": ("loop_lag_seconds", "event-loop lag at the last heartbeat", 0.001),
}


def _labels(worker: Mapping[str, Any]) -> list[str]:
    """A worker's slot and the node it runs on (a host name, or a Ray node id)."""
    return [str(worker["index"]), str(worker.get("node") or "")]


def _worker_metrics(workers: list[Mapping[str, Any]]) -> Iterator[Metric]:
    labels = ["worker", "node"]
    for field, (suffix, text, scale) in _WORKER_GAUGES.items():
        gauge = GaugeMetricFamily(f"rolltap_serve_worker_{suffix}", text, labels=labels)
        for worker in workers:
            value = worker["stats"].get(field)
            if isinstance(value, int | float):
                gauge.add_metric(_labels(worker), value * scale)
        yield gauge
    pool = GaugeMetricFamily(
        "rolltap_serve_worker_pool_clients", "model clients in the worker's pool", labels=labels
    )
    for worker in workers:
        clients = (worker["stats"].get("pool") or {}).get("clients")
        if isinstance(clients, int):
            pool.add_metric(_labels(worker), clients)
    yield pool


#: gateway totals summed over the workers: heartbeat ``totals`` key → (metric, help)
_GATEWAY_TOTALS: dict[str, tuple[str, str]] = {
    "token_drift": (
        "rolltap_token_drift",
        "answered calls whose prompt ids did not extend the previous turn's (tokens.drift)",
    ),
}


def _gateway_totals(workers: list[Mapping[str, Any]]) -> Iterator[Metric]:
    totals = [w["stats"].get("totals") or {} for w in workers]
    for key, (name, text) in _GATEWAY_TOTALS.items():
        counts = (t.get(key) for t in totals)
        yield CounterMetricFamily(name, text, sum(c for c in counts if isinstance(c, int)))
    dropped = CounterMetricFamily(
        "rolltap_dropped_fields",
        "request fields a translation dropped (each named in its request event's rewrites)",
        labels=["field"],
    )
    by_field: Counter[str] = Counter()
    for worker_totals in totals:
        by_field.update(worker_totals.get("dropped_fields") or {})
    for field, count in sorted(by_field.items()):
        dropped.add_metric([field], count)
    yield dropped
    yield overhead_metric(t.get("gateway_overhead") or {} for t in totals)


def _store_metrics(store: Mapping[str, Any]) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "rolltap_serve_store_available",
        "1 while the store takes new batches, 0 while it is unreachable (503 store_unavailable)",
        1.0 if store.get("available") else 0.0,
    )
    yield GaugeMetricFamily(
        "rolltap_serve_store_unavailable_seconds",
        "how long the store has been unreachable (0: it is not)",
        float(store.get("unavailable_s") or 0.0),
    )
    yield GaugeMetricFamily(
        "rolltap_serve_store_full",
        "1 while new batches are refused because a write found the store full (507 store_full)",
        1.0 if store.get("full") else 0.0,
    )
    for name, text in (("pending_commits", "event commits held, not yet durable"),
                       ("pending_bytes", "bytes of writes held, not yet durable")):  # fmt: skip
        yield GaugeMetricFamily(f"rolltap_serve_store_{name}", text, store.get(name) or 0)
    yield CounterMetricFamily(
        "rolltap_serve_rejected_store", "batches refused while the store was unavailable or full",
        store.get("rejected") or 0,
    )  # fmt: skip


class _StatusCollector(Collector):
    def __init__(self, status: Callable[[], Mapping[str, Any]]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        status = self._status()
        for name in ("ready_workers", "capacity", "inflight", "batches"):
            yield GaugeMetricFamily(f"rolltap_serve_{name}", f"{name} now", status[name])
        for name in ("restarts", "workers_lost", "rejected_full"):
            yield CounterMetricFamily(f"rolltap_serve_{name}", f"{name} so far", status[name])
        results = CounterMetricFamily(
            "rolltap_serve_rollouts", "finished rollouts by status", labels=["status"]
        )
        for key, count in sorted(status["results"].items()):
            results.add_metric([key], count)
        yield results
        yield from _store_metrics(status["store"])
        yield from _worker_metrics(status["workers"])
        yield from _gateway_totals(status["workers"])


def render_metrics(status: Callable[[], Mapping[str, Any]]) -> bytes:
    """Prometheus text for one service."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StatusCollector(status))
    return generate_latest(registry)
