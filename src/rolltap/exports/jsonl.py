"""JSONL export and import: one session per line with its run and its events.

A line is ``{"format_version": 1, "run": {...}, "session": {...}, "events": [...]}``;
a fork's events are resolved (its parent's prefix first), so every line stands alone.
Export streams in constant memory: sessions are paged, events streamed, and stored
payload bytes are spliced into the output without being parsed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.events import FORMAT_VERSION, Event, EventLog
from rolltap.store import (
    RunInfo,
    SessionInfo,
    Store,
    StoreValidationError,
    check_attempt,
    check_id,
    check_placement,
    check_status,
    event_json,
    event_rows,
    fetch_run,
    fetch_session,
    iter_event_rows,
    list_sessions,
    reading,
)

__all__ = ["export_jsonl", "iter_sessions", "read_jsonl", "write_sessions"]

_PAGE = 200


@contextlib.contextmanager
def _opened(target: str | Path | IO[bytes], mode: str) -> Iterator[IO[bytes]]:
    if isinstance(target, str | Path):
        try:
            with open(target, mode) as handle:
                yield handle
        except OSError as exc:
            raise StoreValidationError(f"cannot open {target}: {exc.strerror}") from exc
    else:
        yield target


async def iter_sessions(
    conn: AsyncConnection, run: str | None, session: str | None
) -> AsyncIterator[SessionInfo]:
    """The sessions of an export, paged: just ``session``, else ``run``'s, else all."""
    if session is not None:
        yield await fetch_session(conn, session)
        return
    after = ""
    while True:
        page = await list_sessions(conn, run=run, after=after, limit=_PAGE)
        for info in page:
            yield info
        if len(page) < _PAGE:
            return
        after = page[-1].id


async def export_jsonl(
    store: Store,
    dest: str | Path | IO[bytes],
    *,
    run: str | None = None,
    session: str | None = None,
) -> int:
    """Write sessions as JSONL (one per line, forks resolved), in constant memory.

    The sessions are all of the store's, ``run``'s, or just ``session``; returns the
    number written.

    >>> # await export_jsonl(store, "run.jsonl", run=run.id)
    """
    async with reading(store.engine) as conn:
        return await _export(conn, dest, run=run, session=session)


async def _export(
    conn: AsyncConnection, dest: str | Path | IO[bytes], *, run: str | None, session: str | None
) -> int:
    if run is not None:
        await fetch_run(conn, run)  # StoreNotFoundError for an unknown run
    runs: dict[str, dict[str, Any]] = {}
    count = 0
    with _opened(dest, "wb") as out:
        async for info in iter_sessions(conn, run, session):
            if info.run_id not in runs:
                runs[info.run_id] = _run_doc(await fetch_run(conn, info.run_id))
            await _write_session(conn, out, runs[info.run_id], info)
            count += 1
    return count


def _run_doc(r: RunInfo) -> dict[str, Any]:
    return {"id": r.id, "name": r.name, "config": r.config, "created_at": r.created_at}


def write_sessions(
    dest: str | Path | IO[bytes], run: RunInfo, items: Iterable[tuple[SessionInfo, EventLog]]
) -> int:
    """Write in-memory sessions of ``run`` with their logs, as :func:`export_jsonl` does.

    Used for what could not be saved when the database went away: the file imports
    with ``rolltap sessions import``. Returns the number of sessions written.
    """
    count = 0
    with _opened(dest, "wb") as out:
        for info, log in items:
            doc = info.to_dict()
            del doc["parent_id"], doc["fork_at"]  # live sessions are never forks here
            doc["n_events"], doc["forked_from"] = len(log), None
            head = orjson.dumps(
                {"format_version": FORMAT_VERSION, "run": _run_doc(run), "session": doc}
            )
            rows = event_rows(info.id, log)
            body = b",".join(event_json(r["seq"], r["kind"], r["ts"], r["payload"]) for r in rows)
            out.write(head[:-1] + b',"events":[' + body + b"]}\n")
            count += 1
    return count


async def _write_session(
    conn: AsyncConnection, out: IO[bytes], run: dict[str, Any], info: SessionInfo
) -> None:
    doc = info.to_dict()
    parent, fork_at = doc.pop("parent_id"), doc.pop("fork_at")
    doc["forked_from"] = {"session": parent, "at": fork_at} if parent is not None else None
    head = orjson.dumps({"format_version": FORMAT_VERSION, "run": run, "session": doc})
    out.write(head[:-1] + b',"events":[')
    sep = b""
    async for row in iter_event_rows(conn, info):
        out.write(sep + event_json(*row))
        sep = b","
    out.write(b"]}\n")


async def read_jsonl(
    src: str | Path | IO[bytes],
) -> AsyncIterator[tuple[RunInfo, SessionInfo, list[Event]]]:
    """Parse an export line by line: (run, session, events) per session."""
    with _opened(src, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield _parse(line, number)


def _parse(line: bytes, number: int) -> tuple[RunInfo, SessionInfo, list[Event]]:
    try:
        doc = orjson.loads(line)
        version = doc.get("format_version", 0)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise StoreValidationError(f"unsupported format_version {version!r}")
        run, session = _run(doc["run"]), _session(doc["session"], len(doc["events"]))
        events = [_event(i, e) for i, e in enumerate(doc["events"])]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StoreValidationError(f"line {number}: not a rolltap session: {exc!r}") from exc
    except StoreValidationError as exc:
        raise StoreValidationError(f"line {number}: {exc.message}") from exc
    event_rows(session.id, events)  # a payload that cannot be stored fails on its line
    return run, session, events


def _run(doc: dict[str, Any]) -> RunInfo:
    return RunInfo(
        id=check_id(str(doc["id"]), "run"), name=doc.get("name"), config=dict(doc["config"]),
        created_at=float(doc["created_at"]),
        n_sessions=0, n_finished=0, n_failed=0, n_rewarded=0, reward_sum=0.0,
    )  # fmt: skip


def _session(doc: dict[str, Any], n_events: int) -> SessionInfo:
    reward = doc.get("reward")
    # absent from exports written before sessions recorded where they ran
    node_id, worker_id = check_placement(doc.get("node_id"), doc.get("worker_id"))
    # absent from exports written before sessions had attempts (0006): a first attempt
    attempt, retry_of = check_attempt(doc.get("attempt") or 0, doc.get("retry_of"))
    return SessionInfo(
        id=check_id(str(doc["id"]), "session"), run_id=str(doc["run_id"]),
        user=doc.get("user"), task=dict(doc.get("task") or {}),
        status=check_status(str(doc["status"])), created_at=float(doc["created_at"]),
        updated_at=float(doc["updated_at"]), n_events=n_events,
        reward=None if reward is None else float(reward), parent_id=None, fork_at=None,
        node_id=node_id, worker_id=worker_id, attempt=attempt, retry_of=retry_of,
    )  # fmt: skip


def _event(position: int, doc: dict[str, Any]) -> Event:
    if doc["seq"] != position:
        raise ValueError(f"event seq {doc['seq']} at position {position}")
    return Event(seq=position, kind=str(doc["kind"]), ts=float(doc["ts"]), payload=doc["payload"])
