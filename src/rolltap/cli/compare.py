"""Summaries of stored runs (for ``rolltap runs compare``), from the store's summary."""

from __future__ import annotations

from typing import Any

from rolltap.store import Store

__all__ = ["summarize_run"]


async def summarize_run(store: Store, run_id: str) -> dict[str, Any]:
    """The summary ``rolltap eval`` printed, for a run already in ``store``.

    The one ``eval`` stored after its final commit; for other runs (a gateway's, a
    service's, one still running) the store computes it in SQL from its sessions'
    columns, without reading their events.
    """
    summary = await store.run_summary(run_id)
    summary.pop("histograms", None)
    summary.pop("stored", None)
    summary["name"] = (await store.get_run(run_id)).name
    return summary
