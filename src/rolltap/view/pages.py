"""The Runs and Run pages, the Runs page's live JSON, and the routes of every page.

Each page reads one page of rows with a fixed number of queries (see
:mod:`rolltap.store.browse`), whatever the size of the run.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.errors import UsageError
from rolltap.results.statuses import STATUSES
from rolltap.rollouts.scoring_read import Choice, choose, summary_under
from rolltap.store import (
    SESSION_SORTS,
    Score,
    SessionFilter,
    Store,
    StoreNotFoundError,
    reading,
    runs_page,
    sessions_page,
    task_rows,
    tasks_page,
)
from rolltap.view.base import float_param, int_param, page, run_of, store_of
from rolltap.view.keys import CONFIG
from rolltap.view.render import run_cells

__all__ = ["run_view", "runs_json", "runs_view"]


async def _runs(request: web.Request) -> tuple[list[dict[str, Any]], bool, int]:
    offset, size = int_param(request, "offset"), request.app[CONFIG].page_size
    search = request.query.get("q") or None
    async with reading(store_of(request).engine) as conn:
        rows, more = await runs_page(conn, offset=offset, limit=size, search=search)
    return [run_cells(row) for row in rows], more, offset


async def runs_view(request: web.Request) -> web.Response:
    cells, more, offset = await _runs(request)
    size = request.app[CONFIG].page_size
    return page(request, "runs.html", {
        "runs": cells, "more": more, "offset": offset, "size": size,
        "q": request.query.get("q", ""),
    })  # fmt: skip


async def runs_json(request: web.Request) -> web.Response:
    cells, more, offset = await _runs(request)
    return web.json_response({"runs": cells, "more": more, "offset": offset})


def _filter(request: web.Request) -> SessionFilter:
    status = request.query.get("status") or None
    if status is not None and status not in STATUSES:
        raise UsageError(f"unknown status {status!r}")
    return SessionFilter(
        status=status,
        error_code=request.query.get("error") or None,
        task_id=request.query.get("task") or None,
        reward_min=float_param(request, "rmin"),
        reward_max=float_param(request, "rmax"),
        search=request.query.get("q") or None,
    )


async def _compare(
    conn: AsyncConnection, store: Store, other: str, task_ids: list[str | None]
) -> dict[str, Any]:
    info = await run_of(conn, store, other)
    return {"info": info, "tasks": await task_rows(conn, info.id, task_ids)}


async def run_view(request: web.Request) -> web.Response:
    store = store_of(request)
    size = request.app[CONFIG].page_size
    flt = _filter(request)
    sort = request.query.get("sort", "created")
    desc = request.query.get("desc") == "1"
    offset, task_offset = int_param(request, "offset"), int_param(request, "toffset")
    other = request.query.get("compare", "").strip()
    async with reading(store.engine) as conn:
        info = await run_of(conn, store, request.match_info["run"])
        run_id = info.id
        rows, more = await sessions_page(
            conn, run_id, flt, sort=sort, desc=desc, offset=offset, limit=size
        )
        tasks, more_tasks = await tasks_page(conn, run_id, offset=task_offset, limit=size)
        compare = await _compare(conn, store, other, [t.task_id for t in tasks]) if other else None
    choice, summary, scores = await _scored(request, store, run_id, [row.id for row in rows])
    return page(request, "run.html", {
        "run": info, "summary": summary, "sessions": rows, "more": more, "offset": offset,
        "tasks": tasks, "more_tasks": more_tasks, "toffset": task_offset, "size": size,
        "filter": flt, "sort": sort, "desc": desc, "sorts": list(SESSION_SORTS),
        "statuses": sorted(STATUSES), "errors": list((summary.get("errors") or {}).keys()),
        "compare": compare, "compare_id": other, "query": dict(request.query),
        "scoring": choice.to_dict(), "scorings": choice.known, "scores": scores,
    })  # fmt: skip


async def _scored(
    request: web.Request, store: Store, run_id: str, shown: list[str]
) -> tuple[Choice, dict[str, Any], dict[str, Score]]:
    """The scoring ``?scoring=`` picks (default the latest), the summary under it and the
    shown sessions' scores under it (none for the run's own rewards)."""
    ref = request.query.get("scoring") or None
    try:
        choice = await choose(store, run_id, ref)
    except StoreNotFoundError as exc:
        raise UsageError(exc.message) from exc
    summary = await summary_under(store, run_id, choice)
    scores = await store.scores(choice.chosen.id, shown) if choice.chosen else {}
    return choice, summary, scores
