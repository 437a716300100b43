"""Epoch fencing: a commit of an owner whose run was taken over is refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.errors import StoreFencedError
from rolltap.store.schema import leases

if TYPE_CHECKING:
    from rolltap.store.ops import CommitOp

__all__ = ["check_fences"]


async def check_fences(conn: AsyncConnection, ops: Sequence[CommitOp]) -> None:
    """Refuse commits whose epoch is older than their run's lease (a newer owner took over).

    The lease rows are read under a shared lock, so a takeover waits for this transaction.
    """
    fenced = [op for op in ops if op.epoch is not None]
    if not fenced:
        return
    run_ids = sorted({op.state.run_id for op in fenced})
    query = (
        select(leases.c.run_id, leases.c.epoch)
        .where(leases.c.run_id.in_(run_ids))
        .with_for_update(read=True)
    )
    current = {run_id: epoch for run_id, epoch in (await conn.execute(query)).all()}
    for op in fenced:
        epoch = current.get(op.state.run_id)
        if epoch is not None and op.epoch is not None and epoch > op.epoch:
            raise StoreFencedError(
                f"session {op.session_id}: run {op.state.run_id} was taken over (lease epoch "
                f"{epoch}, this owner holds {op.epoch}); its commit is refused"
            )
