"""Epoch fencing: a write of an owner whose run was taken over is refused."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.store.errors import StoreFencedError
from rolltap.store.schema import leases

__all__ = ["check_fences"]


async def check_fences(
    conn: AsyncConnection, writes: Iterable[tuple[str, str, int | None]]
) -> None:
    """Refuse writes whose epoch is older than their run's lease (a newer owner took over).

    ``writes`` are ``(session_id, run_id, epoch)``; an epoch of None is not fenced. The
    lease rows are read under a shared lock, so a takeover waits for this transaction.
    """
    fenced = [(sid, run_id, epoch) for sid, run_id, epoch in writes if epoch is not None]
    if not fenced:
        return
    run_ids = sorted({run_id for _, run_id, _ in fenced})
    query = (
        select(leases.c.run_id, leases.c.epoch)
        .where(leases.c.run_id.in_(run_ids))
        .with_for_update(read=True)
    )
    current = {run_id: epoch for run_id, epoch in (await conn.execute(query)).all()}
    for session_id, run_id, epoch in fenced:
        held = current.get(run_id)
        if held is not None and epoch is not None and held > epoch:
            raise StoreFencedError(
                f"session {session_id}: run {run_id} was taken over (lease epoch "
                f"{held}, this owner holds {epoch}); its write is refused"
            )
