"""The scoring calls of :class:`~rolltap.store.Store` (mixed in): create a scoring of a
run, write its scores and summary, list a run's scorings, pick one, read its scores.

>>> async def rescore(store: Store, run_id: str) -> None:
...     info = await store.create_scoring(run_id, [{"name": "exact", "weight": 1.0}])
...     await store.write_scores(info.id, [Score("s1", 1.0, {"exact": 1.0})])
...     await store.write_scoring_summary(info.id, {"rollouts": 1})
...     assert (await store.resolve_scoring(run_id)).id == info.id  # the latest
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from rolltap.store import reader
from rolltap.store.errors import StoreNotFoundError
from rolltap.store.ops import WriteOp
from rolltap.store.schema import scores, scorings
from rolltap.store.scoring_ops import (
    CreateScoringOp,
    Score,
    ScoringInfo,
    WriteScoresOp,
    WriteScoringSummaryOp,
    score_of,
    scoring_info,
)

__all__ = ["ORIGINAL", "StoreScorings", "pick_scoring"]

#: the scoring reference that means the run's own rewards, from ``rolltap eval``
ORIGINAL = "original"
#: scores per write: a scoring of a large run lands in bounded transactions
_BATCH = 500


def pick_scoring(run_id: str, known: list[ScoringInfo], ref: str | None) -> ScoringInfo | None:
    """Of run ``run_id``'s complete scorings ``known`` (oldest first), the one ``ref``
    names: ``None`` (or ``latest``) the latest, else the run's own rewards (``None``);
    ``original``: ``None``; else a scoring's name (the latest of that name) or its id or
    id prefix. StoreNotFoundError naming the run's scorings when none matches."""
    if ref == ORIGINAL:
        return None
    if ref is None or ref == "latest":
        return known[-1] if known else None
    for info in reversed(known):
        if info.name == ref:
            return info
    matches = [info for info in known if info.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(f"{info.id[:8]} ({info.label})" for info in known) or "none"
    what = "several scorings start with" if matches else "no scoring named"
    raise StoreNotFoundError(
        f"run {run_id}: {what} {ref!r}; its scorings: {listed} (or {ORIGINAL!r})"
    )


class StoreScorings:
    """Scorings of runs (see the module docs); reads use pooled connections."""

    _engine: AsyncEngine

    async def _write(self, op: WriteOp) -> Any:
        raise NotImplementedError

    async def create_scoring(
        self, run_id: str, rewards: Sequence[Mapping[str, Any]], *, name: str | None = None
    ) -> ScoringInfo:
        """A new, empty scoring of ``run_id`` by ``rewards`` (``[{"name", "weight"}]``);
        StoreNotFoundError when the run does not exist."""
        info = ScoringInfo(
            id=uuid.uuid4().hex, run_id=run_id, name=name,
            rewards=[dict(r) for r in rewards], created_at=time.time(),
        )  # fmt: skip
        result: ScoringInfo = await self._write(CreateScoringOp(info))
        return result

    async def write_scores(self, scoring_id: str, batch: Sequence[Score]) -> None:
        """Store each session's score (a session once per scoring), in bounded batches."""
        for start in range(0, len(batch), _BATCH):
            await self._write(WriteScoresOp(scoring_id, batch[start : start + _BATCH]))

    async def write_scoring_summary(self, scoring_id: str, summary: Mapping[str, Any]) -> None:
        """Store the scoring's summary (JSON-ready); a scoring without one is incomplete."""
        await self._write(WriteScoringSummaryOp(scoring_id, summary))

    async def list_scorings(self, run_id: str, *, incomplete: bool = False) -> list[ScoringInfo]:
        """The run's complete scorings (with ``incomplete``, also those whose summary was
        never written: a ``rolltap score`` stopped half-way), oldest first."""
        query = (
            select(scorings)
            .where(scorings.c.run_id == run_id)
            .order_by(scorings.c.created_at, scorings.c.id)
        )
        if not incomplete:
            query = query.where(scorings.c.summary.is_not(None))
        async with reader.reading(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [scoring_info(m) for m in rows]

    async def resolve_scoring(self, run_id: str, ref: str | None = None) -> ScoringInfo | None:
        """The complete scoring of ``run_id`` that ``ref`` names (:func:`pick_scoring`)."""
        if ref == ORIGINAL:
            return None
        return pick_scoring(run_id, await self.list_scorings(run_id), ref)

    async def scores(
        self, scoring_id: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Score]:
        """A scoring's scores by session id (only those of ``session_ids`` when given)."""
        query = select(scores).where(scores.c.scoring_id == scoring_id)
        if session_ids is not None:
            query = query.where(scores.c.session_id.in_(list(session_ids)))
        async with reader.reading(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return {m["session_id"]: score_of(m) for m in rows}
