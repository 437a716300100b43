"""``rolltap serve``'s ``/metrics`` sums what each worker's gateway counts, under the
gateway's own names: the dropped fields per field, as one gateway's ``/metrics`` has them."""

from __future__ import annotations

from typing import Any

from rolltap.serve.supervisor.metrics import render_metrics


def _status(*totals: dict[str, Any]) -> dict[str, Any]:
    workers = [{"index": i, "node": "n", "stats": {"totals": t}} for i, t in enumerate(totals)]
    return {
        "ready_workers": len(workers), "capacity": 8, "inflight": 0, "batches": 0,
        "restarts": 0, "workers_lost": 0, "rejected_full": 0, "results": {}, "store": {},
        "workers": workers,
    }  # fmt: skip


def test_dropped_fields_are_summed_over_the_workers_per_field() -> None:
    status = _status(
        {"dropped_fields": {"store": 2, "include": 1}},
        {"dropped_fields": {"store": 3}},
        {},  # a worker whose heartbeat predates any translation
    )
    text = render_metrics(lambda: status).decode()
    lines = sorted(m for m in text.splitlines() if m.startswith("rolltap_dropped_fields_total"))
    assert lines == [
        'rolltap_dropped_fields_total{field="include"} 1.0',
        'rolltap_dropped_fields_total{field="store"} 5.0',
    ]
