"""Ids by unique prefix: ``_`` and ``%`` literal, exact ids first, ambiguity named."""

from __future__ import annotations

import asyncio

import pytest
import typer
from typer.testing import CliRunner

from rolltap.cli.store_cmd import register
from rolltap.errors import AmbiguousIdError, UsageError
from rolltap.events import EventLog
from rolltap.store import Store, StoreNotFoundError

_RUNS = ["abcd", "abcd1234", "abcd5678", "r1"]
_SESSIONS = ["ro_1234abcd", "ro_1234ef00", "roX1234zzzz", "ro%9aaa", "roa9bbb", "Ro_7777"]


async def _populate(store: Store) -> None:
    for run_id in _RUNS:
        await store.create_run(run_id=run_id)
    for session_id in _SESSIONS:
        await store.create_session("abcd1234", session_id=session_id)


class IdCases:
    async def test_unique_prefixes_resolve(self, store: Store) -> None:
        await _populate(store)
        assert await store.resolve_run_id("abcd12") == "abcd1234"
        assert await store.resolve_run_id("abcd5678") == "abcd5678"
        assert await store.resolve_session_id("ro_1234a") == "ro_1234abcd"
        # `_` is no wildcard: "roX1234zzzz" would match "ro_1234z" under LIKE
        with pytest.raises(StoreNotFoundError, match="no session 'ro_1234z'"):
            await store.resolve_session_id("ro_1234z")
        assert await store.resolve_session_id("roX1") == "roX1234zzzz"
        # nor is `%`: "roa9bbb" would match "ro%9" under LIKE
        assert await store.resolve_session_id("ro%9") == "ro%9aaa"
        assert await store.resolve_session_id("roa9") == "roa9bbb"

    async def test_exact_ids_win_and_case_counts(self, store: Store) -> None:
        await _populate(store)
        # "abcd" is a run and the prefix of two others: the exact one wins
        assert await store.resolve_run_id("abcd") == "abcd"
        assert await store.resolve_run_id("r1") == "r1"  # short, but exact
        # SQLite's LIKE ignores case; ids do not
        with pytest.raises(StoreNotFoundError):
            await store.resolve_session_id("RO_1234A")
        assert await store.resolve_session_id("Ro_7") == "Ro_7777"

    async def test_short_and_missing_prefixes_are_not_found(self, store: Store) -> None:
        await _populate(store)
        with pytest.raises(StoreNotFoundError, match="at least 4 characters"):
            await store.resolve_session_id("ro_")
        with pytest.raises(StoreNotFoundError, match="no run 'zzzzzz'"):
            await store.resolve_run_id("zzzzzz")
        with pytest.raises(StoreNotFoundError):
            await store.resolve_run_id("x" * 80)  # longer than any id

    async def test_ambiguous_prefix_lists_at_most_ten(self, store: Store) -> None:
        await _populate(store)
        with pytest.raises(AmbiguousIdError) as caught:
            await store.resolve_session_id("ro_1234")
        assert caught.value.candidates == ["ro_1234abcd", "ro_1234ef00"]
        assert isinstance(caught.value, UsageError) and caught.value.code == "ambiguous_id"
        assert "ro_1234abcd, ro_1234ef00" in caught.value.message
        for n in range(12):
            await store.create_session("abcd", session_id=f"ro_ffff{n:02d}")
        with pytest.raises(AmbiguousIdError, match="more than 10") as many:
            await store.resolve_session_id("ro_ffff")
        assert many.value.candidates == [f"ro_ffff{n:02d}" for n in range(10)]

    def test_cli_takes_prefixes(self, store_url: str) -> None:
        app, runner = typer.Typer(), CliRunner()
        register(app)
        run_id, base_id, fork_id = asyncio.run(_cli_populate(store_url))

        def invoke(*args: str) -> tuple[int, str]:
            result = runner.invoke(app, [*args, "--store", store_url])
            return result.exit_code, " ".join(result.output.split())  # unwrapped

        code, shown = invoke("sessions", "show", base_id[:6])
        assert code == 0 and f"session {base_id}" in shown, shown
        code, listed = invoke("sessions", "list", "--run", run_id[:5], "--json")
        assert code == 0 and base_id in listed and fork_id in listed, listed
        code, out = invoke("sessions", "export", "--session", base_id[:6], "-o", "-")
        assert code == 0 and out.count('"format_version"') == 1, out
        code, out = invoke("runs", "compare", run_id[:5], "7ba5c", "--json")
        assert code == 0 and '"cli-run"' in out and '"other-run"' in out, out
        code, out = invoke("runs", "delete", "7ba5", "--yes")
        assert code != 0 and "[ambiguous_id]" in out and run_id in out, out
        code, out = invoke("sessions", "show", "ro_")  # the shared start of both ids
        assert code != 0 and "at least 4 characters" in out, out
        code, out = invoke("sessions", "show", "ro_0")
        assert code != 0 and "[ambiguous_id]" in out and base_id in out and fork_id in out, out
        assert "Traceback" not in out
        code, out = invoke("sessions", "delete", fork_id[:9], "--yes")
        assert code == 0 and f"deleted session {fork_id}" in out, out
        code, out = invoke("runs", "delete", run_id[:5], "--yes")
        assert code == 0 and f"deleted run {run_id} (1 session(s))" in out, out


async def _cli_populate(url: str) -> tuple[str, str, str]:
    async with await Store.open(url, upgrade=True) as store:
        run = await store.create_run("cli-run", run_id="7ba5b25f0c1e4b6fa1d2c3b4a5968778")
        await store.create_run("other-run", run_id="7ba5c0ffee0c1e4b6fa1d2c3b4a59687")
        base = await store.create_session(run.id, session_id="ro_0a11bb22cc33dd44")
        log = EventLog()
        log.append("note", {"text": "hello"})
        await store.commit(base.id, log, status="completed", reward=1.0)
        fork = await store.create_session(
            run.id, session_id="ro_0f99ee88dd77cc66", parent=base.id, fork_at=1
        )
        return run.id, base.id, fork.id
