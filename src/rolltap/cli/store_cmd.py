"""``rolltap db``, ``rolltap sessions`` and ``rolltap runs``: the event store from the shell.

Every command takes ``--store URL`` (default ``ROLLTAP_STORE``, else ``sqlite:///rolltap.db``).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import typer

from rolltap.cli.common import console, err_console, run_async
from rolltap.cli.compare import compare_command
from rolltap.cli.runs_show import runs_show
from rolltap.cli.tables import Column, fitted_table
from rolltap.errors import UsageError
from rolltap.exports import (
    OnDrift,
    TokenExport,
    build_transcript,
    export_hf,
    export_jsonl,
    export_tokens,
    import_jsonl,
    render_lines,
    require_hf,
)
from rolltap.results.rollout import describe_versions, policy_versions
from rolltap.results.statuses import FAILED_STATUSES
from rolltap.store import (
    DEFAULT_STORE_URL,
    STORE_ENV,
    RunInfo,
    SessionInfo,
    Store,
    mask_url,
    reading,
    resolve_store_url,
    upgrade,
)

__all__ = ["register"]

JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar=STORE_ENV,
        show_default=DEFAULT_STORE_URL,
        help="Store URL: sqlite:///path.db, postgresql://…, mysql://… or a SQLAlchemy URL.",
    ),
]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def db_upgrade(store: StoreOpt = None) -> None:
    """Create or migrate the store's schema to the current version."""
    url = resolve_store_url(store)

    async def main() -> None:
        revision = await upgrade(url)
        console.print(f"{mask_url(url)}: schema at revision {revision}")

    run_async(main())


def sessions_list(
    store: StoreOpt = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Only this run's sessions (id or prefix).")
    ] = None,
    status: Annotated[str | None, typer.Option("--status", help="Only this status.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1)] = None,
    as_json: JsonOpt = False,
) -> None:
    """List sessions, oldest first."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            run_id = None if run is None else await opened.resolve_run_id(run)
            items = await opened.list_sessions(run_id, status, limit=limit)
        if as_json:
            _print_json([s.to_dict() for s in items])
        else:
            _print_sessions(items)

    run_async(main())


def _print_json(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        typer.echo(orjson.dumps(doc).decode())


_SESSION_COLUMNS: tuple[Column, ...] = (
    Column("session", ident=True), Column("run", ident=True), Column("status"),
    Column("reward", drop=1), Column("events", drop=2), Column("user", drop=3),
    Column("fork of", ident=True, drop=4), Column("updated", drop=5),
)  # fmt: skip


def _print_sessions(items: list[SessionInfo]) -> None:
    rows = [
        [s.id, s.run_id, s.status, _reward(s.reward), str(s.n_events), s.user or "",
         f"{s.parent_id}@{s.fork_at}" if s.parent_id else "", _when(s.updated_at)]
        for s in items
    ]  # fmt: skip
    columns, title = _SESSION_COLUMNS, None
    if len({s.run_id for s in items}) == 1:  # one run: named once, above the table
        columns, title = (columns[0], *columns[2:]), f"run {items[0].run_id}"
        rows = [[row[0], *row[2:]] for row in rows]
    console.print(fitted_table(console, columns, rows, title=title))


def sessions_show(
    session_id: Annotated[str, typer.Argument(metavar="ID")], store: StoreOpt = None
) -> None:
    """Print a session's transcript: each model call's new messages, tool calls and
    results, reasoning, its answer or error, usage and timing (a fork's inherited
    prefix first). ID: a session id or a unique prefix of at least 4 characters."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            full_id = await opened.resolve_session_id(session_id)
            info = await opened.get_session(full_id)
            history = await opened.events(full_id)
        fork = f", fork of {info.parent_id} at {info.fork_at}" if info.parent_id else ""
        placed = info.node_id or info.worker_id  # where it ran, when its owner said
        where = f" on {info.node_id or '-'} / {info.worker_id or '-'}" if placed else ""
        versions = describe_versions(policy_versions(history))  # only when an answer has one
        # a later attempt (rolltap eval --retry-failed) names the session it repeats
        again = f" attempt {info.attempt} (retry of {info.retry_of})" if info.retry_of else ""
        console.print(
            f"[bold]session {info.id}[/bold] run {info.run_id} user {info.user or '-'} "
            f"status {info.status} reward {_reward(info.reward)} events {info.n_events}{fork}"
            f"{where}{again}{f' {versions}' if versions else ''}",
            highlight=False,
        )
        for line in render_lines(build_transcript(history)):
            console.print(line, markup=False, highlight=False, soft_wrap=True)

    run_async(main())


def sessions_export(
    output: Annotated[
        str, typer.Option("-o", "--output", help="JSONL file (- for stdout); hf: a directory.")
    ],
    store: StoreOpt = None,
    run: Annotated[str | None, typer.Option("--run", help="Only this run (id or prefix).")] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Only this session (id or prefix).")
    ] = None,
    fmt: Annotated[
        Literal["jsonl", "tokens", "hf"],
        typer.Option(
            "--format",
            help="jsonl: sessions with their events (re-importable); tokens: one training "
            "sequence per rollout from its token records (docs/training-export.md); hf: a "
            "Hugging Face dataset directory for datasets.load_from_disk, one row per "
            "rollout (docs/datasets-export.md; the hf extra).",
        ),
    ] = "jsonl",
    include_empty: Annotated[
        bool,
        typer.Option(
            "--include-empty",
            help="tokens: also write rollouts that made no model call (no_model_calls), "
            "with no turns; left out by default.",
        ),
    ] = False,
    on_drift: Annotated[
        OnDrift,
        typer.Option(
            "--on-drift",
            help="tokens, hf: a rollout whose prompt ids drifted from what was sampled "
            "before (tokens.drift): split (segments, format v1 as always), keep (tokens only: "
            "one sequence with the drifted prompt's ids as sent, the drift marked) or drop "
            "(left out, counted on stderr; an export it leaves empty is written empty, "
            "exit 0).",
        ),
    ] = "split",
) -> None:
    """Export sessions as JSONL: one session per line with its events, forks resolved.

    With --format tokens: one training sequence per rollout that has token records,
    others skipped (counted on stderr). Left with no line, it fails (exit 1, no file)
    when the data is why: every session read had no token records, made no model call
    (without --include-empty) or had a malformed record; when --on-drift drop left a
    rollout out, or no session matched, it writes an empty file and exits 0. With
    --format hf: a dataset directory, one row per rollout (empty: a dataset of no rows).
    """

    async def main() -> None:
        if fmt == "hf":
            if output == "-":
                raise UsageError("--format hf writes a directory: give -o DIR")
            if on_drift == "keep":
                raise UsageError("--on-drift keep is for --format tokens (hf: split or drop)")
            require_hf()
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            run_id = None if run is None else await opened.resolve_run_id(run)
            session_id = None if session is None else await opened.resolve_session_id(session)
            dest = sys.stdout.buffer if output == "-" else Path(output)
            if fmt == "tokens":
                async with reading(opened.engine) as conn:
                    tokens = await export_tokens(
                        conn, dest, run=run_id, session=session_id,
                        include_empty=include_empty, on_drift=on_drift,
                    )  # fmt: skip
                _report_tokens(tokens, include_empty)
                return
            if fmt == "hf":
                async with reading(opened.engine) as conn:
                    done = await export_hf(
                        conn, output, run=run_id, session=session_id, on_drift=on_drift
                    )
                for line in done.report():
                    err_console.print(line, markup=False, highlight=False)
                return
            count = await export_jsonl(opened, dest, run=run_id, session=session_id)
        err_console.print(f"exported {count} session(s)")

    run_async(main())


def _report_tokens(result: TokenExport, include_empty: bool) -> None:
    err_console.print(f"exported {result.exported} rollout(s)")
    if result.no_model_calls:
        what = "included" if include_empty else "skipped (--include-empty writes them)"
        err_console.print(
            f"{what}: {len(result.no_model_calls)} session(s) that made no model call "
            "(no_model_calls)", markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip
    if result.without_tokens:
        err_console.print(f"skipped {len(result.without_tokens)} session(s) without token records")
    if result.drifted:
        what = {"split": "split into segments at the drift", "keep": "kept as one sequence",
                "drop": "left out"}[result.on_drift]  # fmt: skip
        err_console.print(
            f"{len(result.drifted)} rollout(s) with token drift ({what}; --on-drift "
            f"{result.on_drift})", markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip
    for session_id, why in result.malformed.items():
        err_console.print(f"skipped session {session_id}: {why}", markup=False, highlight=False)


def sessions_import(
    source: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False)],
    store: StoreOpt = None,
    skip_existing: Annotated[
        bool, typer.Option("--skip-existing", help="Skip sessions already stored.")
    ] = False,
) -> None:
    """Import sessions from a JSONL export (or a rolltap-unsaved-RUN.jsonl file).

    A session already stored gets the events it lacks appended, with the file's status
    and reward, so importing a file twice stores each event once.
    """

    async def main() -> None:
        async with await Store.open(resolve_store_url(store)) as opened:
            count = await import_jsonl(
                opened, source, skip_existing=skip_existing, merge=not skip_existing
            )
        console.print(f"imported {count} session(s)")

    run_async(main())


def runs_list(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """List runs with their session counts and mean reward (a retried run: failed and mean
    reward of one attempt per rollout, by its attempt policy)."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            items = await opened.list_runs()
            retried = {r.id: await opened.run_summary(r.id) for r in items if r.retries}
        if as_json:
            _print_json([r.to_dict() for r in items])
        else:
            _print_runs(items, retried)

    run_async(main())


_RUN_COLUMNS = (
    Column("run", ident=True), Column("name", drop=2), Column("sessions", drop=4),
    Column("finished", drop=5), Column("failed", drop=3), Column("interrupted", drop=7),
    Column("mean reward", drop=1),
    Column("created", drop=6), Column("retried", drop=8),
)  # fmt: skip


def _print_runs(items: list[RunInfo], retried: dict[str, dict[str, Any]]) -> None:
    rows = []
    for r in items:
        failed, mean, note = str(r.n_failed), _reward(r.mean_reward), ""
        summary = retried.get(r.id)
        if summary is not None:  # one attempt per rollout, as its summary counts them
            statuses = summary["statuses"]
            failed = str(sum(statuses.get(s, 0) for s in FAILED_STATUSES))
            mean, attempts = _reward(summary["reward"]["mean"]), summary.get("attempts") or {}
            note = f"{attempts.get('retried', '?')} of {attempts.get('slots', '?')}"
        rows.append([r.id, r.name or "", str(r.n_sessions), str(r.n_finished), failed,
                     str(r.n_interrupted), mean, _when(r.created_at), note])  # fmt: skip
    console.print(fitted_table(console, _RUN_COLUMNS, rows))


def runs_delete(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    store: StoreOpt = None,
    cascade: Annotated[
        bool, typer.Option("--cascade", help="Also delete other runs' forks of its sessions.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a run with its sessions and their events (RUN: an id or a unique prefix)."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            full_id = await opened.resolve_run_id(run_id)
            if not yes:
                await _confirm(f"Delete run {full_id} and all its sessions?")
            count = await opened.delete_run(full_id, cascade=cascade)
        console.print(f"deleted run {full_id} ({count} session(s))")

    run_async(main())


def sessions_delete(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    store: StoreOpt = None,
    cascade: Annotated[
        bool, typer.Option("--cascade", help="Also delete the sessions forked from it.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session and its events (ID: an id or a unique prefix)."""

    async def main() -> None:
        async with await Store.open(resolve_store_url(store), create=False) as opened:
            full_id = await opened.resolve_session_id(session_id)
            if not yes:
                await _confirm(f"Delete session {full_id}?")
            deleted = await opened.delete_session(full_id, cascade=cascade)
        console.print(f"deleted session {full_id} ({len(deleted) - 1} fork(s))")

    run_async(main())


async def _confirm(question: str) -> None:
    # the prompt blocks on the terminal: off the loop, with the store kept open
    await asyncio.to_thread(typer.confirm, question, abort=True)


def register(app: typer.Typer) -> None:
    """Add ``db``, ``sessions`` and ``runs`` to ``app``."""
    db = typer.Typer(help="The store's schema.", no_args_is_help=True)
    db.command("upgrade")(db_upgrade)
    sessions = typer.Typer(help="Sessions (one rollout each) in the store.", no_args_is_help=True)
    sessions.command("list")(sessions_list)
    sessions.command("show")(sessions_show)
    sessions.command("export")(sessions_export)
    sessions.command("import")(sessions_import)
    sessions.command("delete")(sessions_delete)
    runs = typer.Typer(help="Runs (named batches of sessions) in the store.", no_args_is_help=True)
    runs.command("list")(runs_list)
    runs.command("show")(runs_show)
    runs.command("delete")(runs_delete)
    runs.command("compare")(compare_command)
    app.add_typer(db, name="db")
    app.add_typer(sessions, name="sessions")
    app.add_typer(runs, name="runs")
