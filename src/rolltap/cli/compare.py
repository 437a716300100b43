"""``rolltap runs compare``: stored runs' summaries side by side, each under a scoring."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import orjson
import typer

from rolltap.cli.common import console, fail, run_async
from rolltap.cli.compare_sets import compare_sets
from rolltap.cli.report import render_compare
from rolltap.errors import UsageError
from rolltap.rollouts.scoring_read import choose, summary_under
from rolltap.store import Store, resolve_store_url

__all__ = ["compare_command", "summarize_run"]


async def summarize_run(store: Store, run_id: str, scoring: str | None = None) -> dict[str, Any]:
    """The summary ``rolltap eval`` printed, for a run already in ``store``, under the
    scoring ``scoring`` names (``rolltap score``; default the latest, ``original`` none).

    The one ``eval`` stored after its final commit; for other runs (a gateway's, a
    service's, one still running) the store computes it in SQL from its sessions'
    columns, without reading their events.
    """
    summary = await summary_under(store, run_id, await choose(store, run_id, scoring))
    summary.pop("histograms", None)
    summary.pop("stored", None)
    summary["name"] = (await store.get_run(run_id)).name
    return summary


def compare_command(
    run_a: Annotated[str, typer.Argument(help="First run id")],
    run_b: Annotated[str, typer.Argument(help="Second run id (may be the first, scored again)")],
    scoring: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME|ID|original",
            help="The scoring to read (rolltap score): once for both runs, or twice, one per"
            " run \\[each run's latest]",
        ),
    ] = None,
    sets: Annotated[
        bool, typer.Option("--sets", help="RUN_A and RUN_B are eval sets: compare run by run")
    ] = False,
    store: Annotated[str | None, typer.Option(help="Store URL \\[sqlite:///rolltap.db]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Two runs' summaries side by side (reward, pass@k, statuses, tokens, latency); or
    one run under two scorings (``--scoring original --scoring NAME``); or two eval sets
    run by run (``--sets``)."""
    if sets:
        if scoring:
            fail(UsageError("--sets compares the runs as they were scored: no --scoring"))
        run_async(compare_sets(run_a, run_b, store, as_json))
        return
    refs: list[str | None] = list(scoring) if scoring else [None]
    if len(refs) > 2:
        fail(UsageError(f"--scoring: once for both runs or twice, one per run (got {len(refs)})"))
    refs = refs * 2 if len(refs) == 1 else refs

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            ids = [await opened.resolve_run_id(rid) for rid in (run_a, run_b)]  # or prefixes
            pairs = list(zip(ids, refs, strict=True))
            runs = {_column(rid, ref, ids): await summarize_run(opened, rid, ref)
                    for rid, ref in pairs}  # fmt: skip
        if as_json:
            sys.stdout.write(orjson.dumps(runs, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            render_compare(console, runs)

    run_async(main())


def _column(run_id: str, ref: str | None, ids: list[str]) -> str:
    """A compared summary's heading: the run id, and the scoring when one run is read twice."""
    if ids[0] != ids[1]:
        return run_id
    return f"{run_id[:12]} ({ref or 'latest'})"
