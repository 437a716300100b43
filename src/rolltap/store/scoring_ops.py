"""A run scored again (``rolltap score``): the scoring's row, its scores, its summary.

A *scoring* is one set of reward functions applied after the fact to a stored run's
rollouts; a run may hold several and the original rewards (the sessions' own columns)
are never touched. Each write here is one :class:`~rolltap.store.ops.WriteOp` through the
store's serial writer, able to tell on a retry whether it already landed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.errors import StoreNotFoundError
from rolltap.store.ops import WriteOp
from rolltap.store.reader import exists
from rolltap.store.schema import runs, scores, scorings
from rolltap.store.serialize import dump_doc, load_doc

__all__ = [
    "CreateScoringOp",
    "Score",
    "ScoringInfo",
    "WriteScoresOp",
    "WriteScoringSummaryOp",
    "score_of",
    "scoring_info",
]


@dataclass(frozen=True, slots=True)
class ScoringInfo:
    """One scoring of a run: its reward specs (``[{"name", "weight"}]``), an optional
    name, when it was made, and its summary once every score is written."""

    id: str
    run_id: str
    name: str | None
    rewards: list[dict[str, Any]]
    created_at: float
    summary: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """How a person tells it apart: its name, else its reward specs."""
        if self.name:
            return self.name
        return ",".join(f"{r.get('name')}={r.get('weight', 1.0):g}" for r in self.rewards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "run_id": self.run_id, "name": self.name, "rewards": self.rewards,
            "created_at": self.created_at, "summary": self.summary,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Score:
    """One session's reward under a scoring: ``reward`` and its ``components``, or, when
    the reward function raised, ``error_code`` ``reward_error`` and no reward; ``None``
    reward without an error for a rollout that is not scored (it did not run its harness
    to an end, as in ``rolltap eval``)."""

    session_id: str
    reward: float | None
    components: dict[str, float] = field(default_factory=dict)
    error_code: str | None = None
    error_message: str | None = None


def scoring_info(m: RowMapping) -> ScoringInfo:
    rewards = load_doc(m["rewards"]).get("rewards")
    summary = load_doc(m["summary"]) if m["summary"] is not None else None
    if summary is not None:
        summary.pop("token", None)  # the write's own: no part of the summary
    return ScoringInfo(
        id=m["id"], run_id=m["run_id"], name=m["name"],
        rewards=list(rewards) if isinstance(rewards, list) else [],
        created_at=float(m["created_at"]),
        summary=summary,
    )  # fmt: skip


def score_of(m: RowMapping) -> Score:
    parts = load_doc(m["components"]) if m["components"] is not None else {}
    return Score(
        m["session_id"], m["reward"], {str(k): float(v) for k, v in parts.items()},
        m["error_code"], m["error_message"],
    )  # fmt: skip


class CreateScoringOp(WriteOp):
    """Create ``info``'s row; StoreNotFoundError when its run does not exist."""

    def __init__(self, info: ScoringInfo) -> None:
        super().__init__()
        self.info = info

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        if not await exists(conn, runs, self.info.run_id):
            raise StoreNotFoundError(f"no run {self.info.run_id!r}")
        await conn.execute(
            scorings.insert().values(
                id=self.info.id, run_id=self.info.run_id, name=self.info.name,
                rewards=dump_doc({"rewards": self.info.rewards}),
                created_at=self.info.created_at, summary=None,
            )
        )  # fmt: skip

    def outcome(self) -> ScoringInfo:
        return self.info

    async def applied(self, conn: AsyncConnection) -> bool:
        return await exists(conn, scorings, self.info.id)


class WriteScoresOp(WriteOp):
    """Insert a batch of one scoring's scores (each session once)."""

    def __init__(self, scoring_id: str, batch: Sequence[Score]) -> None:
        super().__init__()
        self.scoring_id, self.batch = scoring_id, list(batch)
        self.nbytes = 256 * max(1, len(self.batch))

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        rows = [
            {
                "scoring_id": self.scoring_id,
                "session_id": s.session_id,
                "reward": s.reward,
                "components": dump_doc(s.components) if s.components else None,
                "error_code": s.error_code,
                "error_message": s.error_message,
            }
            for s in self.batch
        ]
        if rows:
            await conn.execute(scores.insert(), rows)

    async def applied(self, conn: AsyncConnection) -> bool:
        if not self.batch:
            return True
        c = scores.c
        where = (c.scoring_id == self.scoring_id) & (c.session_id == self.batch[0].session_id)
        return await conn.scalar(select(c.session_id).where(where)) is not None


class WriteScoringSummaryOp(WriteOp):
    """Store ``summary`` (JSON-ready) as the scoring's: it is complete."""

    def __init__(self, scoring_id: str, summary: Mapping[str, Any]) -> None:
        super().__init__()
        self.scoring_id, self.summary = scoring_id, {**summary}

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        if not await exists(conn, scorings, self.scoring_id):
            raise StoreNotFoundError(f"no scoring {self.scoring_id!r}")
        doc = dump_doc({**self.summary, "token": self.token})
        where = scorings.c.id == self.scoring_id
        await conn.execute(scorings.update().where(where).values(summary=doc))

    async def applied(self, conn: AsyncConnection) -> bool:
        text = await conn.scalar(select(scorings.c.summary).where(scorings.c.id == self.scoring_id))
        return text is not None and f'"token":"{self.token}"' in text
