"""The eval-set calls of :class:`~rolltap.store.Store` (mixed in): an *eval set* is several
runs under one id (``rolltap eval-set``), its file kept as given so the set can be resumed
as a whole; each of its runs names it (``rolltap_runs.set_id``).

>>> async def two(store: Store) -> None:
...     info = await store.create_eval_set("nightly", {"runs": [{}, {}]})
...     await store.create_run("a", set_id=info.id)
...     [run.name for run in await store.set_runs(info.id)]  # ['a']
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rolltap.store import reader
from rolltap.store.errors import StoreNotFoundError
from rolltap.store.ids import resolve_id
from rolltap.store.models import RunInfo
from rolltap.store.ops import WriteOp
from rolltap.store.reader import exists
from rolltap.store.schema import eval_sets, runs
from rolltap.store.serialize import dump_doc, load_doc

__all__ = ["EvalSetInfo", "StoreEvalSets"]


@dataclass(frozen=True, slots=True)
class EvalSetInfo:
    """One eval set: its name, its config (the set file, as given) and when it began."""

    id: str
    name: str | None
    config: dict[str, Any]
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "config": self.config,
                "created_at": self.created_at}  # fmt: skip


def _info(m: RowMapping) -> EvalSetInfo:
    return EvalSetInfo(m["id"], m["name"], load_doc(m["config"]), float(m["created_at"]))


class _CreateSetOp(WriteOp):
    def __init__(self, info: EvalSetInfo) -> None:
        super().__init__()
        self.info = info

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        i = self.info
        await conn.execute(eval_sets.insert().values(
            id=i.id, name=i.name, config=dump_doc(i.config), created_at=i.created_at,
        ))  # fmt: skip

    def outcome(self) -> EvalSetInfo:
        return self.info

    async def applied(self, conn: AsyncConnection) -> bool:
        return await exists(conn, eval_sets, self.info.id)


class _DeleteSetOp(WriteOp):
    """Delete the set's row (its runs are deleted before, one by one)."""

    def __init__(self, set_id: str) -> None:
        super().__init__()
        self.set_id = set_id

    async def apply(self, conn: AsyncConnection, now: float) -> None:
        if not await exists(conn, eval_sets, self.set_id):
            raise StoreNotFoundError(f"no eval set {self.set_id!r}")
        await conn.execute(eval_sets.delete().where(eval_sets.c.id == self.set_id))

    async def applied(self, conn: AsyncConnection) -> bool:
        return not await exists(conn, eval_sets, self.set_id)


class StoreEvalSets:
    """Eval sets (see the module docs); reads use pooled connections."""

    _engine: AsyncEngine

    async def _write(self, op: WriteOp) -> Any:
        raise NotImplementedError

    async def delete_run(self, run_id: str, *, cascade: bool = False) -> int:
        raise NotImplementedError

    async def create_eval_set(self, name: str | None, config: Mapping[str, Any]) -> EvalSetInfo:
        """A new eval set (its runs are created with ``create_run(…, set_id=info.id)``)."""
        info = EvalSetInfo(uuid.uuid4().hex, name, dict(config), time.time())
        made: EvalSetInfo = await self._write(_CreateSetOp(info))
        return made

    async def get_eval_set(self, set_id: str) -> EvalSetInfo:
        """One eval set; StoreNotFoundError if there is none."""
        async with reader.reading(self._engine) as conn:
            query = select(eval_sets).where(eval_sets.c.id == set_id)
            row = (await conn.execute(query)).mappings().first()
        if row is None:
            raise StoreNotFoundError(f"no eval set {set_id!r}")
        return _info(row)

    async def list_eval_sets(self) -> list[EvalSetInfo]:
        """Every eval set, oldest first."""
        query = select(eval_sets).order_by(eval_sets.c.created_at, eval_sets.c.id)
        async with reader.reading(self._engine) as conn:
            return [_info(m) for m in (await conn.execute(query)).mappings().all()]

    async def resolve_eval_set_id(self, prefix: str) -> str:
        """The eval set whose id is ``prefix`` or starts with it (as ``resolve_run_id``)."""
        async with reader.reading(self._engine) as conn:
            return await resolve_id(conn, eval_sets, prefix, "eval set")

    async def set_runs(self, set_id: str) -> list[RunInfo]:
        """The set's runs, oldest first."""
        async with reader.reading(self._engine) as conn:
            ids = await conn.scalars(
                select(runs.c.id).where(runs.c.set_id == set_id).order_by(runs.c.created_at)
            )
            return [await reader.fetch_run(conn, run_id) for run_id in list(ids)]

    async def delete_eval_set(self, set_id: str, *, cascade: bool = False) -> int:
        """Delete the set and its runs (each as ``delete_run``, ``cascade`` for runs forked
        from elsewhere); the sessions deleted."""
        await self.get_eval_set(set_id)  # StoreNotFoundError before anything is deleted
        deleted = 0
        for run in await self.set_runs(set_id):
            deleted += await self.delete_run(run.id, cascade=cascade)
        await self._write(_DeleteSetOp(set_id))
        return deleted
