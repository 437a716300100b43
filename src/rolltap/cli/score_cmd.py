"""``rolltap score RUN --reward …``: score a stored run again, with no model call.

The new rewards are a new scoring of the run (the run's own are never changed); its
summary prints as ``rolltap eval``'s does, and ``runs show``, ``runs compare`` and the
viewer read the run under its latest scoring from then on (``--scoring`` picks another).
"""

from __future__ import annotations

import sys
from typing import Annotated

import orjson
import typer

from rolltap.cli.common import console, err_console, fail, run_async
from rolltap.cli.report import ProgressReporter, render_summary
from rolltap.errors import ConfigError
from rolltap.rollouts.rewards import BUILTIN_REWARDS
from rolltap.rollouts.scoring import DEFAULT_SCORE_CONCURRENCY, score_stored
from rolltap.rollouts.scoring_read import Choice
from rolltap.store import STORE_ENV, Store, resolve_store_url

__all__ = ["register", "score_command"]


def score_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="Run id or a unique prefix")],
    reward: Annotated[
        list[str] | None,
        typer.Option(help="NAME[=WEIGHT] or module:function, repeatable (as in eval)"),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="A label for this scoring (runs show --scoring NAME)")
    ] = None,
    c: Annotated[
        int, typer.Option("-c", min=1, help="Rollouts scored at once")
    ] = DEFAULT_SCORE_CONCURRENCY,
    store: Annotated[
        str | None,
        typer.Option("--store", envvar=STORE_ENV, help="Store URL \\[sqlite:///rolltap.db]"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Score a stored run's rollouts again with other rewards, from their stored answers
    and events: no model call. The result is a new scoring of the run; its own rewards
    stay as they are."""
    if not reward:
        missing = ConfigError("name at least one reward: --reward NAME[=WEIGHT] or module:function")
        missing.hint = (
            "rolltap score RUN --reward exact (built-ins: " + ", ".join(BUILTIN_REWARDS) + ")"
        )
        fail(missing)

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            run_id = await opened.resolve_run_id(run)
            with ProgressReporter(err_console, label="score") as progress:
                scored = await score_stored(
                    opened, run_id, reward, name=name, concurrency=c,
                    on_plan=progress.plan, on_result=progress.result,
                )  # fmt: skip
            known = await opened.list_scorings(run_id)
        summary = {**scored.summary, "scoring": Choice(scored.scoring, known).to_dict()}
        summary.pop("histograms", None)
        if as_json:
            doc = {"run_id": run_id, "scoring": scored.scoring.to_dict()}
            sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        render_summary(console, run_id, summary)
        console.print(
            f"scoring {scored.scoring.id} stored; the run's own rewards are unchanged "
            f"(rolltap runs show {run_id[:8]} --scoring original)",
            highlight=False, soft_wrap=True,
        )  # fmt: skip

    run_async(main())


def register(app: typer.Typer) -> None:
    """Add ``score`` to ``app``."""
    app.command("score")(score_command)
