"""The CLI (through a throwaway Typer app) and the migrations."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import typer
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from typer.testing import CliRunner

from rolltap.cli.store_cmd import register
from rolltap.events import EventLog
from rolltap.store import Store
from rolltap.store.migrate import head_revision
from rolltap.store.schema import VERSION_TABLE, metadata


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


async def _populate(url: str) -> tuple[str, str, str]:
    async with await Store.open(url) as store:
        run = await store.create_run("cli-run", {"model": "m"})
        base = await store.create_session(run.id, user="ana", task={"prompt": "1, 2, 3,"})
        log = EventLog()
        messages = [{"role": "user", "content": "1, 2, 3,"}]
        log.append("model_request", {"dialect": "openai_chat", "messages": messages})
        log.append("model_response", {"status": 200, "message": {"content": " 4, 5,"}})
        log.append("reward", {"reward": 1.0})
        await store.commit(base.id, log, status="completed", reward=1.0)
        fork = await store.create_session(run.id, parent=base.id, fork_at=1)
        return run.id, base.id, fork.id


def _diffs(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return list(compare_metadata(context, metadata))


class CliCases:
    def test_cli_commands(self, store_url: str, tmp_path: Path) -> None:
        app, runner = _cli(), CliRunner()

        def ok(*args: str) -> str:
            result = runner.invoke(app, [*args, "--store", store_url])
            assert result.exit_code == 0, result.output
            return result.output

        assert f"revision {head_revision()}" in ok("db", "upgrade")
        run_id, base_id, fork_id = asyncio.run(_populate(store_url))
        runs = [orjson.loads(line) for line in ok("runs", "list", "--json").splitlines()]
        assert [(r["id"], r["n_sessions"], r["mean_reward"]) for r in runs] == [(run_id, 2, 1.0)]
        listed = ok("sessions", "list", "--run", run_id, "--status", "completed", "--json")
        assert [orjson.loads(line)["id"] for line in listed.splitlines()] == [base_id]
        shown = ok("sessions", "show", fork_id)
        assert "1, 2, 3," in shown and "4, 5," not in shown  # the fork's inherited prefix
        assert "4, 5," in ok("sessions", "show", base_id)
        out = tmp_path / "export.jsonl"
        ok("sessions", "export", "--run", run_id, "-o", str(out))
        assert len(out.read_bytes().splitlines()) == 2
        assert "2 session" in ok("runs", "delete", run_id, "--yes")
        assert ok("runs", "list", "--json").strip() == ""
        assert "imported 2" in ok("sessions", "import", str(out))
        env = {"ROLLTAP_STORE": store_url}
        from_env = runner.invoke(app, ["sessions", "list", "--json"], env=env)
        assert from_env.exit_code == 0 and len(from_env.output.splitlines()) == 2
        missing = runner.invoke(app, ["sessions", "show", "nope", "--store", store_url])
        assert missing.exit_code == 1 and "no session" in missing.output

    async def test_migrations_create_exactly_the_schema(self, store: Store) -> None:
        async with store.engine.connect() as conn:
            assert await conn.run_sync(_diffs) == []
