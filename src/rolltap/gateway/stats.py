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

__all__ = ["GatewayStats", "render_metrics"]


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
    errors: Counter[str] = field(default_factory=Counter)

    def record_response(self, usage: Any) -> None:
        self.responses += 1
        if isinstance(usage, dict):
            prompt = usage.get("prompt_tokens")
            completion = usage.get("completion_tokens")
            if isinstance(prompt, int):
                self.prompt_tokens += prompt
            if isinstance(completion, int):
                self.completion_tokens += completion

    def record_error(self, code: str) -> None:
        self.errors[code] += 1

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
        )
        for name in names:
            yield CounterMetricFamily(f"rolltap_gateway_{name}", f"{name} so far", totals[name])
        errors = CounterMetricFamily(
            "rolltap_gateway_errors", "errors by rolltap code", labels=["code"]
        )
        for code, count in sorted(totals["errors"].items()):
            errors.add_metric([code], count)
        yield errors
        for name in ("rollouts", "intercepts", "servers"):
            yield GaugeMetricFamily(f"rolltap_gateway_{name}", f"{name} now", snap[name])
        pool = snap["pool"]
        for name, value in pool.items():
            if isinstance(value, int):
                yield GaugeMetricFamily(f"rolltap_pool_{name}", f"model-client pool {name}", value)


def render_metrics(snapshot: Callable[[], Mapping[str, Any]]) -> bytes:
    """Prometheus text for one gateway (a private registry, so gateways never collide)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snapshot))
    return generate_latest(registry)
