"""An eval set's table: one row per run (rollouts, done, failed, mean reward with its 95%
interval, the first pass@k, retry passes), then the set's total."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from rich.console import Console

from rolltap.cli.tables import Column, fitted_table
from rolltap.evalset import SetResult

__all__ = ["render_set", "set_json"]

_DONE = ("completed", "limit_reached")


def _cells(summary: Mapping[str, Any]) -> list[str]:
    if not summary:
        return ["-"] * 6
    statuses = summary.get("statuses") or {}
    done = sum(statuses.get(s, 0) for s in _DONE)
    reward = summary.get("reward") or {}
    mean, ci = reward.get("mean"), reward.get("ci95")
    passk = next(iter((summary.get("pass_at_k") or {}).items()), None)
    return [
        str(summary.get("rollouts", 0)), str(done), str(summary.get("rollouts", 0) - done),
        "-" if mean is None else f"{mean:.3f}",
        f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-",
        f"{passk[0]} {passk[1]:.3f}" if passk else "-",
    ]  # fmt: skip


_COLUMNS = (
    Column("#"), Column("run"), Column("state", drop=5), Column("run id", ident=True),
    Column("rollouts"),
    Column("done"), Column("not done", drop=3), Column("mean reward"),
    Column("95% interval", drop=2), Column("pass@k", drop=1), Column("retries", drop=4),
)  # fmt: skip


def render_set(console: Console, result: SetResult) -> None:
    """The set's id on its own line, then its table (lesser columns left out on a narrow
    terminal; run ids whole)."""
    named = f" ({result.name})" if result.name else ""
    console.print(f"set {result.set_id}{named}", soft_wrap=True, highlight=False)
    rows = []
    for run in result.runs:
        state = "done" if run.run_id and not run.interrupted else (
            "not started" if run.run_id is None else "unfinished"
        )  # fmt: skip
        rows.append([str(run.index + 1), run.name or "-", state, run.run_id or "-",
                     *_cells(run.summary), str(run.retried)])  # fmt: skip
    rows.append(["", "total", "", "", *_cells(result.summary), ""])
    console.print(fitted_table(console, _COLUMNS, rows, title="eval set"))


def set_json(result: SetResult) -> str:
    """The set as JSON: its id, name, whether it was interrupted, its runs, its summary."""
    doc = {
        "set_id": result.set_id, "name": result.name, "interrupted": result.interrupted,
        "runs": [{"index": r.index, "name": r.name, "run_id": r.run_id,
                  "interrupted": r.interrupted, "retried": r.retried, "summary": r.summary}
                 for r in result.runs],
        "summary": result.summary,
    }  # fmt: skip
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
