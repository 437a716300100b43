"""The run summary a run's owner stores after its final commit.

Stored beside what only SQL over the sessions knows at that moment (the histograms of
rewards, durations and tokens, the mean duration), so a finished run's summary and
charts are one row read however many sessions it has. Any later commit that changes
the run's counters clears it (``rolltap.store.ops``): a stored summary is never stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.errors import StoreNotFoundError
from rolltap.store.ops import WriteOp
from rolltap.store.rollup_read import read_run_stats
from rolltap.store.schema import runs
from rolltap.store.serialize import dump_doc

__all__ = ["WriteRunSummaryOp"]


class WriteRunSummaryOp(WriteOp):
    """Store ``summary`` (JSON-ready) as run ``run_id``'s, with its histograms."""

    def __init__(self, run_id: str, summary: Mapping[str, Any]) -> None:
        super().__init__()
        self.run_id, self.summary = run_id, dict(summary)

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        found = await conn.scalar(select(runs.c.n_sessions).where(runs.c.id == self.run_id))
        if found is None:
            raise StoreNotFoundError(f"no run {self.run_id!r}")
        stats = (await read_run_stats(conn, [self.run_id], now))[self.run_id]
        doc = {
            **self.summary,
            "duration_s": stats.summary(int(found), 1)["duration_s"],
            "histograms": stats.histograms(),
            "token": self.token,
        }
        where = runs.c.id == self.run_id
        await conn.execute(runs.update().where(where).values(summary=dump_doc(doc)))

    async def applied(self, conn: AsyncConnection) -> bool:
        text = await conn.scalar(select(runs.c.summary).where(runs.c.id == self.run_id))
        return text is not None and f'"token":"{self.token}"' in text
