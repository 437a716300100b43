"""The run summary a run's owner stores after its final commit; a retry pass noted in
the run's config (which clears that summary).

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
from rolltap.store.serialize import dump_doc, load_doc

__all__ = ["RecordRetryOp", "WriteRunSummaryOp"]


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
            # a summary of one attempt per slot brings its own mean duration
            "duration_s": stats.summary(int(found), 1)["duration_s"],
            **self.summary,
            "histograms": stats.histograms(),
            "token": self.token,
        }
        where = runs.c.id == self.run_id
        await conn.execute(runs.update().where(where).values(summary=dump_doc(doc)))

    async def applied(self, conn: AsyncConnection) -> bool:
        text = await conn.scalar(select(runs.c.summary).where(runs.c.id == self.run_id))
        return text is not None and f'"token":"{self.token}"' in text


class RecordRetryOp(WriteOp):
    """A retry pass of run ``run_id`` begins: appended to its config's ``retries`` (when,
    the attempt policy and codes, how many slots it reruns), the policy and codes set in
    its ``run`` config (later reads summarize by them); its stored summary is cleared."""

    def __init__(self, run_id: str, *, policy: str, codes: list[str] | None, slots: int) -> None:
        super().__init__()
        self.run_id, self.policy, self.codes, self.slots = run_id, policy, codes, slots

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        text = await conn.scalar(select(runs.c.config).where(runs.c.id == self.run_id))
        if text is None:
            raise StoreNotFoundError(f"no run {self.run_id!r}")
        config = load_doc(text)
        run = config.get("run")
        if isinstance(run, dict):
            run["attempt_policy"], run["retry_codes"] = self.policy, self.codes
        passes = config.get("retries")
        config["retries"] = [*(passes if isinstance(passes, list) else []), {
            "at": now, "attempt_policy": self.policy, "retry_codes": self.codes,
            "slots": self.slots, "token": self.token,
        }]  # fmt: skip
        where = runs.c.id == self.run_id
        await conn.execute(runs.update().where(where).values(config=dump_doc(config), summary=None))

    async def applied(self, conn: AsyncConnection) -> bool:
        text = await conn.scalar(select(runs.c.config).where(runs.c.id == self.run_id))
        return text is not None and f'"token":"{self.token}"' in text
