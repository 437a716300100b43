"""Gateway counters, and their Prometheus exposition.

Counters are plain integers bumped on the hot path; the Prometheus collector reads them
only when scraped, so metrics cost nothing per call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rolltap.dialects.translate import general
from rolltap.gateway.overhead import Overhead, overhead_metric

__all__ = ["MAX_DROPPED_FIELDS", "GatewayStats", "dropped_field", "render_metrics"]

#: distinct dropped fields counted by name; any further one is counted as ``other`` (a
#: harness may send fields of any name: the metric's labels must stay bounded)
MAX_DROPPED_FIELDS = 256
#: a dropped field's name for the counters: its path less list positions (translations
#: record it so already; an upstream of another kind may not)
dropped_field = general


@dataclass(slots=True)
class GatewayStats:
    requests: int = 0
    responses: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rollouts_registered: int = 0
    #: calls an SDK sent as a retry (``x-stainless-retry-count`` > 0), and those answered
    #: from an answer their original could not deliver
    retries: int = 0
    replays: int = 0
    #: relayed calls whose body was read past the conversation its rollout sent before
    #: (:mod:`.relay_splice`): the prefix's messages neither parsed nor written again
    read_past: int = 0
    #: answered calls whose prompt ids drifted from the previous turn's (``tokens.drift``)
    token_drift: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: fields a translation dropped, by :func:`dropped_field` (a request event's
    #: ``{"dropped": path, "reason": ...}`` rewrites)
    dropped_fields: Counter[str] = field(default_factory=Counter)
    #: what the gateway itself added to each answered call (:mod:`.overhead`)
    overhead: Overhead = field(default_factory=Overhead)

    def record_response(
        self, usage: Any, tokens: Any = None, *, overhead_s: float | None = None
    ) -> None:
        self.responses += 1
        if overhead_s is not None:
            self.overhead.record(overhead_s)
        if isinstance(tokens, dict) and "drift" in tokens:
            self.token_drift += 1
        if isinstance(usage, dict):
            prompt = usage.get("prompt_tokens")
            completion = usage.get("completion_tokens")
            if isinstance(prompt, int):
                self.prompt_tokens += prompt
            if isinstance(completion, int):
                self.completion_tokens += completion

    def record_error(self, code: str) -> None:
        self.errors[code] += 1

    def record_rewrites(self, rewrites: list[dict[str, Any]]) -> None:
        """Count the dropped fields among a sent request's ``rewrites``."""
        for rewrite in rewrites:
            path = rewrite.get("dropped")
            if not isinstance(path, str):
                continue
            name, counts = dropped_field(path), self.dropped_fields
            if name not in counts and len(counts) >= MAX_DROPPED_FIELDS:
                name = "other"
            counts[name] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "responses": self.responses,
            "errors": dict(self.errors),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "rollouts_registered": self.rollouts_registered,
            "retries": self.retries,
            "replays": self.replays,
            "read_past": self.read_past,
            "token_drift": self.token_drift,
            "dropped_fields": dict(self.dropped_fields),
            "gateway_overhead": self.overhead.as_dict(),
        }


class _SnapshotCollector(Collector):
    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        totals = snap["totals"]
        names = (
            "requests",
            "responses",
            "prompt_tokens",
            "completion_tokens",
            "retries",
            "replays",
            "read_past",
        )
        for name in names:
            yield CounterMetricFamily(f"rolltap_gateway_{name}", f"{name} so far", totals[name])
        errors = CounterMetricFamily(
            "rolltap_gateway_errors", "errors by rolltap code", labels=["code"]
        )
        for code, count in sorted(totals["errors"].items()):
            errors.add_metric([code], count)
        yield errors
        yield CounterMetricFamily(
            "rolltap_token_drift",
            "answered calls whose prompt ids did not extend the previous turn's (tokens.drift)",
            totals.get("token_drift", 0),
        )
        dropped = CounterMetricFamily(
            "rolltap_dropped_fields",
            "request fields a translation dropped (each named in its request event's rewrites)",
            labels=["field"],
        )
        for name, count in sorted(totals.get("dropped_fields", {}).items()):
            dropped.add_metric([name], count)
        yield dropped
        yield overhead_metric([totals.get("gateway_overhead") or {}])
        for name in ("rollouts", "intercepts", "servers"):
            yield GaugeMetricFamily(f"rolltap_gateway_{name}", f"{name} now", snap[name])
        pool = snap["pool"]
        for name, value in pool.items():
            if isinstance(value, int):
                yield GaugeMetricFamily(f"rolltap_pool_{name}", f"model-client pool {name}", value)
        yield from _replica_metrics(snap.get("replicas", {}))


#: per-replica counters: (metric suffix, ReplicaStats field, help)
_REPLICA_COUNTERS = (
    ("calls", "calls", "calls started on the replica"),
    ("errors", "errors", "calls on the replica that failed"),
    ("rejected", "rejected", "calls refused for a full queue or a queue timeout"),
    ("downs", "downs", "times the replica was marked down"),
    ("latency_seconds_sum", "latency_sum_s", "seconds the replica's calls took, summed"),
)
_REPLICA_GAUGES = (
    ("pinned_rollouts", "pinned_rollouts", "rollouts pinned to the replica now"),
    ("in_flight", "in_flight", "calls in flight on the replica now"),
    ("waiting", "waiting", "calls waiting for a slot on the replica now"),
)


def _replica_metrics(endpoints: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """``rolltap_replica_*``, labelled by endpoint and replica (a URL without user info)."""
    if not endpoints:
        return
    labels = ["endpoint", "replica"]
    families: list[tuple[CounterMetricFamily | GaugeMetricFamily, str]] = [
        (CounterMetricFamily(f"rolltap_replica_{name}", text, labels=labels), key)
        for name, key, text in _REPLICA_COUNTERS
    ]
    families += [
        (GaugeMetricFamily(f"rolltap_replica_{name}", text, labels=labels), key)
        for name, key, text in _REPLICA_GAUGES
    ]
    up = GaugeMetricFamily("rolltap_replica_up", "1 unless within a cool-off", labels=labels)
    repins = CounterMetricFamily(
        "rolltap_replica_repins", "rollouts moved off a down replica", labels=["endpoint"]
    )
    for endpoint, snap in sorted(endpoints.items()):
        repins.add_metric([endpoint], snap["repins"])
        for replica in snap["replicas"]:
            values = [endpoint, replica["replica"]]
            up.add_metric(values, 1 if replica["up"] else 0)
            for family, key in families:
                family.add_metric(values, replica[key])
    yield from (family for family, _ in families)
    yield up
    yield repins


def render_metrics(snapshot: Callable[[], Mapping[str, Any]]) -> bytes:
    """Prometheus text for one gateway (a private registry, so gateways never collide)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snapshot))
    return generate_latest(registry)
