"""``rolltap eval-set SET.toml`` (``--resume SET``) and ``rolltap sets list|show|delete``."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Literal

import orjson
import typer

from rolltap.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SIGINT,
    Interrupts,
    console,
    err_console,
    fail,
    print_error,
    run_async,
)
from rolltap.cli.report import ProgressReporter
from rolltap.cli.sets_report import render_set, set_json
from rolltap.errors import UsageError
from rolltap.evalset import SetControl, SetResult, eval_set, read_eval_set, resume_eval_set
from rolltap.rollouts import Hooks
from rolltap.store import STORE_ENV, Store, resolve_store_url

__all__ = ["register"]

StoreOpt = Annotated[
    str | None,
    typer.Option("--store", envvar=STORE_ENV, help="Store URL \\[sqlite:///rolltap.db]"),
]


def _control(progress: ProgressReporter) -> SetControl:
    """Every run's progress on one bar; stoppable on a signal."""

    def hooks_for(index: int, name: str | None) -> Hooks:
        def plan(run_id: str, total: int) -> None:
            progress.plan_more(run_id, total, f"#{index + 1} {name or ''}".strip())

        return Hooks(on_result=progress.result, on_plan=plan, on_stage=progress.stage)

    return SetControl(hooks_for)


def eval_set_command(
    file: Annotated[str | None, typer.Argument(metavar="SET.toml", help="The set's file")] = None,
    resume: Annotated[
        str | None, typer.Option(metavar="SET", help="Go on with a stored set where it stopped")
    ] = None,
    c: Annotated[
        int | None, typer.Option("-c", min=1, help="Rollouts at once, for the set")
    ] = None,
    mode: Annotated[
        Literal["sequential", "parallel"] | None,
        typer.Option(help="Runs one after another, or all at once \\[sequential]"),
    ] = None,
    retries: Annotated[
        int | None, typer.Option(min=0, help="Retry passes of each run's failed rollouts \\[0]")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Store URL, over the file's \\[the file's, else ROLLTAP_STORE, else"
            " sqlite:///rolltap.db]"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Several runs (tasks, harness, endpoint, rewards) under one set id: in order or
    together, failed rollouts retried, one table across the runs (docs/eval-sets.md)."""
    if (file is None) == (resume is None):
        fail(UsageError("give a set file, or --resume SET (not both)"))
    overrides: dict[str, object] = {"c": c, "mode": mode, "retries": retries}
    if file is not None:
        overrides["store"] = store
    interrupts = Interrupts()

    async def main() -> int:
        with ProgressReporter(err_console, label="eval-set") as progress:
            control = _control(progress)
            interrupts.handler = lambda _signum: _stop(control)
            if resume is not None:
                done = await resume_eval_set(resume, store=store, overrides=overrides,
                                             control=control)  # fmt: skip
            else:
                assert file is not None
                done = await eval_set(file, overrides=overrides, control=control)
        _report(done, as_json)
        if done.interrupted or interrupts.signum is not None:
            return interrupts.exit_code or EXIT_SIGINT
        if done.ok:
            return EXIT_OK
        print_error("set_failed", "no rollout of the set completed")
        return EXIT_FAILED

    run_async(main(), interrupts)


def _stop(control: SetControl) -> bool:
    err_console.print("stopping: no new run starts, rollouts in flight are cancelled "
                      "(state is kept)")  # fmt: skip
    control.stop()
    return True


def _report(done: SetResult, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(set_json(done))
    else:
        render_set(console, done)
    if done.interrupted:
        err_console.print(f"unfinished: go on with  rolltap eval-set --resume {done.set_id}",
                          soft_wrap=True, markup=False, highlight=False)  # fmt: skip


def sets_list(
    store: StoreOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False
) -> None:
    """Every eval set in the store: id, name, runs, created."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            found = [(info, len(await opened.set_runs(info.id)))
                     for info in await opened.list_eval_sets()]  # fmt: skip
        if as_json:
            rows = [{**info.to_dict(), "runs_started": n} for info, n in found]
            sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        for info, n in found:
            planned = len(info.config.get("runs", []))
            console.print(f"{info.id}  {info.name or '-'}  {n}/{planned} runs",
                          highlight=False, soft_wrap=True)  # fmt: skip

    run_async(main())


def sets_show(
    set_id: Annotated[str, typer.Argument(metavar="SET")],
    store: StoreOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """A set's runs and its summary table (SET: an id or a unique prefix)."""

    async def main() -> None:
        _report(await read_eval_set(set_id, store=store), as_json)

    run_async(main())


def sets_delete(
    set_id: Annotated[str, typer.Argument(metavar="SET")],
    store: StoreOpt = None,
    cascade: Annotated[bool, typer.Option(help="Also delete forks of its sessions")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a set with its runs, their sessions and events."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            full_id = await opened.resolve_eval_set_id(set_id)
            if not yes:
                question = f"Delete eval set {full_id}, its runs and all their sessions?"
                await asyncio.to_thread(typer.confirm, question, abort=True)
            count = await opened.delete_eval_set(full_id, cascade=cascade)
        console.print(f"deleted eval set {full_id} ({count} session(s))")

    run_async(main())


def register(app: typer.Typer) -> None:
    """Add ``eval-set`` and ``sets`` to ``app``."""
    app.command("eval-set")(eval_set_command)
    sets = typer.Typer(help="Eval sets (rolltap eval-set) in the store.", no_args_is_help=True)
    sets.command("list")(sets_list)
    sets.command("show")(sets_show)
    sets.command("delete")(sets_delete)
    app.add_typer(sets, name="sets")
