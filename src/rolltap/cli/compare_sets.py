"""``rolltap runs compare --sets SET_A SET_B``: two eval sets, run by run, then in total.

Runs are matched by name (a set's runs are named in its file, else ``SET#K``), the rest by
their place in the set; a run with no partner is compared with nothing (``-``).
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from rolltap.cli.common import console
from rolltap.cli.report import render_compare
from rolltap.evalset import SetResult, SetRun, read_eval_set

__all__ = ["compare_sets", "pair_runs"]


def pair_runs(a: list[SetRun], b: list[SetRun]) -> list[tuple[SetRun | None, SetRun | None]]:
    """``a``'s runs each with its partner in ``b`` (same name, else same place), then
    ``b``'s runs left over."""
    left = list(b)
    partners: dict[int, SetRun] = {}
    # names first, over all the runs: a run matched by its place must not take the
    # partner a later run has by name
    for run in a:
        named = next((o for o in left if o.name == run.name), None)
        if named is not None:
            partners[run.index] = named
            left.remove(named)
    for run in a:
        placed = None if run.index in partners else next(
            (o for o in left if o.index == run.index), None
        )  # fmt: skip
        if placed is not None:
            partners[run.index] = placed
            left.remove(placed)
    return [(run, partners.get(run.index)) for run in a] + [(None, run) for run in left]


def _summary(run: SetRun | None) -> dict[str, Any]:
    if run is None or not run.summary:
        return {"rollouts": 0, "statuses": {}, "reward": {"mean": None}, "tokens": {}}
    return {k: v for k, v in run.summary.items() if k not in ("histograms", "stored")}


async def compare_sets(set_a: str, set_b: str, store: str | None, as_json: bool) -> None:
    """Read both sets and print them compared run by run, then their totals."""
    sets = [await read_eval_set(s, store=store) for s in (set_a, set_b)]
    pairs = pair_runs(sets[0].runs, sets[1].runs)
    if as_json:
        doc = {
            "sets": [s.set_id for s in sets],
            "runs": [{"a": _doc(x), "b": _doc(y)} for x, y in pairs],
            "total": {"a": sets[0].summary, "b": sets[1].summary},
        }
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    heads = [f"{s.set_id[:8]} {s.name or ''}".strip() for s in sets]
    for x, y in pairs:
        either = x if x is not None else y
        console.print(f"run {either.name if either else '-'}", highlight=False)
        render_compare(console, {heads[0]: _summary(x), heads[1]: _summary(y)})
    console.print("total", highlight=False)
    render_compare(console, {heads[0]: _total(sets[0]), heads[1]: _total(sets[1])})


def _doc(run: SetRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"index": run.index, "name": run.name, "run_id": run.run_id, "summary": run.summary}


def _total(result: SetResult) -> dict[str, Any]:
    return {k: v for k, v in result.summary.items() if k != "runs"}
