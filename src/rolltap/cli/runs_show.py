"""``rolltap runs show RUN``: one stored run — its summary, its attempts, its sessions.

The summary is the one ``rolltap eval`` printed (stored by the run's owner, else made
from the store), or, once the run was scored again (``rolltap score``), its latest
scoring's (``--scoring`` picks one, ``original`` the run's own rewards). A run retried
with ``rolltap eval --retry-failed`` says how many of its rollouts were retried and by
which policy its summary counts one attempt each, and its sessions list shows each
session's attempt and the session it repeats.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import orjson
import typer

from rolltap.cli.common import console, run_async
from rolltap.cli.report import render_summary
from rolltap.cli.tables import Column, fitted_table
from rolltap.results.attempts import by_slot
from rolltap.results.rollout import RolloutResult
from rolltap.rollouts.scoring_read import choose, results_under, summary_under
from rolltap.store import STORE_ENV, Store, resolve_store_url

__all__ = ["runs_show"]

_COLUMNS = (
    Column("session", ident=True), Column("task"), Column("sample", drop=4),
    Column("attempt"), Column("retry of", ident=True, drop=1), Column("status"),
    Column("reward", drop=2), Column("error", drop=3),
)  # fmt: skip


def _row(res: RolloutResult) -> list[str]:
    reward = "-" if res.reward is None else f"{res.reward:.3f}"
    return [res.session_id or "", res.task_id, str(res.sample), str(res.attempt),
            res.retry_of or "", res.status, reward, res.error_code or ""]  # fmt: skip


def _attempt(res: RolloutResult) -> int:
    return res.attempt


def _session_doc(res: RolloutResult) -> dict[str, Any]:
    return {
        "id": res.session_id, "task_id": res.task_id, "sample": res.sample,
        "attempt": res.attempt, "retry_of": res.retry_of, "status": res.status,
        "reward": res.reward, "error_code": res.error_code,
    }  # fmt: skip


def runs_show(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    store: Annotated[
        str | None,
        typer.Option("--store", envvar=STORE_ENV, help="Store URL \\[sqlite:///rolltap.db]"),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=0, help="List at most N sessions (0: none)")
    ] = None,
    scoring: Annotated[
        str | None,
        typer.Option(
            metavar="NAME|ID|original",
            help="Read the run under this scoring (rolltap score) \\[the latest]",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """A run's summary (one attempt per rollout once retried; under its latest scoring
    once scored again), attempts and sessions (RUN: an id or a unique prefix)."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            full_id = await opened.resolve_run_id(run_id)
            info = await opened.get_run(full_id)
            choice = await choose(opened, full_id, scoring)
            summary = await summary_under(opened, full_id, choice)
            results = await results_under(opened, await opened.run_results(full_id), choice)
        # each rollout's attempts together, in order
        slots = by_slot(results).values()
        sessions = [res for group in slots for res in sorted(group, key=_attempt)][:limit]
        summary.pop("histograms", None)
        if as_json:
            doc = {"run": info.to_dict(), "summary": summary,
                   "sessions": [_session_doc(res) for res in sessions]}  # fmt: skip
            sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        if info.name:
            console.print(f"name {info.name}", highlight=False, markup=False)
        render_summary(console, full_id, summary)
        if sessions:
            rows = [_row(res) for res in sessions]
            console.print(fitted_table(console, _COLUMNS, rows, title="sessions"))

    run_async(main())
