"""Each page's query count does not grow with the run: equal at 1,000 and 10,000 sessions.

Statements are counted with SQLAlchemy's ``before_cursor_execute`` on the store's
engine while the real viewer app answers over HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import event

from rolltap.store import Store
from rolltap.view import ViewConfig, ViewServer
from view.bulk import bulk_run

pytestmark = pytest.mark.timeout(180)


def _pages(run_id: str, session_id: str) -> dict[str, str]:
    return {
        "runs": "",
        "runs json": "api/runs",
        "run": f"runs/{run_id}",
        "run filtered, sorted, page 3": f"runs/{run_id}?status=failed&sort=reward&desc=1"
        "&rmin=0&rmax=1&offset=100&toffset=50",
        "run compared with itself": f"runs/{run_id}?compare={run_id}",
        "run searched": f"runs/{run_id}?q=task-0001&error=harness_error",
        "rollout": f"sessions/{session_id}",
    }


async def _counts(tmp_path: Path, n: int) -> dict[str, int]:
    url = f"sqlite:///{tmp_path / f'bulk{n}.db'}"
    async with await Store.open(url) as store:
        run_id, session_id = await bulk_run(store, n)
        seen: list[str] = []

        def count(*args: Any) -> None:
            seen.append(args[2])

        event.listen(store.engine.sync_engine, "before_cursor_execute", count)
        counts = {}
        async with (
            ViewServer(store, ViewConfig(port=0)) as server,
            aiohttp.ClientSession() as http,
        ):
            for name, path in _pages(run_id, session_id).items():
                seen.clear()
                async with http.get(server.url + path) as resp:
                    assert resp.status == 200, (name, await resp.text())
                    await resp.read()
                counts[name] = len(seen)
        event.remove(store.engine.sync_engine, "before_cursor_execute", count)
    return counts


async def test_page_query_counts_do_not_grow_with_the_run(tmp_path: Path) -> None:
    small, large = await _counts(tmp_path, 1_000), await _counts(tmp_path, 10_000)
    assert small == large
    assert all(0 < n <= 16 for n in small.values()), small
