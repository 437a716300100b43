"""Where sessions ran (``node_id``, ``worker_id``): every read path, export and import,
the CLI, the rollout page, and migration 0005 over sessions stored before it."""

from __future__ import annotations

import asyncio
import io

import aiohttp
import orjson
import pytest
import typer
from alembic import command
from sqlalchemy.engine import Connection
from typer.testing import CliRunner

from rolltap.cli.store_cmd import register
from rolltap.exports import export_jsonl, import_jsonl
from rolltap.store import SchemaVersionError, SessionInfo, Store, StoreValidationError, upgrade
from rolltap.store.engine import create_engine
from rolltap.store.migrate import alembic_config, head_revision
from rolltap.store.url import backend_of, to_sqlalchemy_url
from rolltap.view import ViewConfig, ViewServer
from store.cases_summary import fill_at_0002

#: as long as the column allows: a server that cut it short would fail the round trips
NODE = "node-" + "a" * 123
WORKER = "worker-7"


def _where(info: SessionInfo) -> tuple[str | None, str | None]:
    return info.node_id, info.worker_id


async def _cli(url: str, *args: str) -> str:
    app = typer.Typer()
    register(app)
    result = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--store", url])
    assert result.exit_code == 0, result.output
    return result.output


async def _rollout_page(store: Store, session_id: str) -> str:
    async with (
        ViewServer(store, ViewConfig(port=0)) as server,
        aiohttp.ClientSession() as http,
        http.get(f"{server.url}sessions/{session_id}") as resp,
    ):
        assert resp.status == 200
        return await resp.text()


def downgrade_sync(conn: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = conn
    command.downgrade(config, revision)


async def downgrade_to(url: str, revision: str) -> None:
    engine = create_engine(to_sqlalchemy_url(url))
    try:
        async with engine.connect() as conn:
            await conn.run_sync(downgrade_sync, revision)
            await conn.commit()
    finally:
        await engine.dispose()


class PlacementCases:
    async def test_sessions_keep_the_node_and_worker_they_were_created_with(
        self, store: Store
    ) -> None:
        run = await store.create_run("placed")
        placed = await store.create_session(run.id, task={"k": 1}, node_id=NODE, worker_id=WORKER)
        plain = await store.create_session(run.id)
        half = await store.create_session(run.id, worker_id="w0")
        want = {placed.id: (NODE, WORKER), plain.id: (None, None), half.id: (None, "w0")}
        assert {s.id: _where(s) for s in (placed, plain, half)} == want
        assert {s: _where(await store.get_session(s)) for s in want} == want
        assert {s.id: _where(s) for s in await store.list_sessions(run.id)} == want
        doc = (await store.get_session(placed.id)).to_dict()
        assert (doc["node_id"], doc["worker_id"]) == (NODE, WORKER)
        assert (await store.get_session(plain.id)).to_dict()["node_id"] is None

        buf = io.BytesIO()
        assert await export_jsonl(store, buf, run=run.id) == 3
        exported = [orjson.loads(line)["session"] for line in buf.getvalue().splitlines()]
        assert {d["id"]: (d["node_id"], d["worker_id"]) for d in exported} == want
        assert await store.delete_run(run.id) == 3
        assert await import_jsonl(store, io.BytesIO(buf.getvalue())) == 3
        assert {s.id: _where(s) for s in await store.list_sessions(run.id)} == want

    async def test_an_export_without_placement_imports_with_none(self, store: Store) -> None:
        run = await store.create_run()
        session = await store.create_session(run.id, node_id="n1", worker_id="w1")
        buf = io.BytesIO()
        await export_jsonl(store, buf, session=session.id)
        doc = orjson.loads(buf.getvalue())
        del doc["session"]["node_id"], doc["session"]["worker_id"]  # as before 0005
        await store.delete_run(run.id)
        assert await import_jsonl(store, io.BytesIO(orjson.dumps(doc) + b"\n")) == 1
        assert _where(await store.get_session(session.id)) == (None, None)

    async def test_a_placement_past_its_column_is_refused_before_anything_is_stored(
        self, store: Store
    ) -> None:
        run = await store.create_run()
        for node, worker in ((NODE + "x", None), (None, "w" * 65), ("", "w")):
            with pytest.raises(StoreValidationError, match="id must be None or 1"):
                await store.create_session(run.id, node_id=node, worker_id=worker)
        assert await store.list_sessions(run.id) == []

    async def test_the_cli_and_the_rollout_page_show_where_a_session_ran(
        self, store: Store, store_url: str
    ) -> None:
        run = await store.create_run()
        placed = await store.create_session(run.id, node_id="node-a", worker_id="w3")
        plain = await store.create_session(run.id)
        listed = await _cli(store_url, "sessions", "list", "--run", run.id, "--json")
        docs = {d["id"]: d for d in map(orjson.loads, listed.splitlines())}
        assert (docs[placed.id]["node_id"], docs[placed.id]["worker_id"]) == ("node-a", "w3")
        assert docs[plain.id]["node_id"] is None
        # words, not lines: the header wraps on a narrow terminal
        shown = (await _cli(store_url, "sessions", "show", placed.id)).split()
        assert shown[shown.index("events") + 2 :][:4] == ["on", "node-a", "/", "w3"]
        shown = (await _cli(store_url, "sessions", "show", plain.id)).split()
        assert shown[shown.index("events") + 2 :][:1] != ["on"]
        page = await _rollout_page(store, placed.id)
        assert "<dt>node / worker</dt>" in page
        assert '<dd id="rollout-placement">node-a / w3</dd>' in page
        assert "node / worker" not in await _rollout_page(store, plain.id)

    async def test_migration_0005_upgrades_sessions_stored_at_0004(self, store_url: str) -> None:
        await upgrade(store_url, "0002")
        await fill_at_0002(store_url)  # a run "run", sessions "base" and its fork "fork"
        assert await upgrade(store_url, "0004") == "0004"
        if backend_of(to_sqlalchemy_url(store_url)) != "sqlite":
            with pytest.raises(SchemaVersionError) as caught:
                await Store.open(store_url)
            assert caught.value.code == "store_schema_outdated"
            assert "rolltap db upgrade" in str(caught.value)
            assert await upgrade(store_url) == head_revision()
        async with await Store.open(store_url) as store:  # SQLite upgrades itself
            new = await store.create_session("run", node_id="n", worker_id="w")
            sessions = {s.id: s for s in await store.list_sessions("run")}
        assert {s: _where(info) for s, info in sessions.items()} == {
            "base": (None, None), "fork": (None, None), new.id: ("n", "w"),
        }  # fmt: skip
        assert (sessions["base"].status, sessions["base"].reward) == ("completed", 1.0)
        # and back: 0005's downgrade drops the columns, the rows stay
        await downgrade_to(store_url, "0004")
        assert await upgrade(store_url) == head_revision()
        async with await Store.open(store_url) as store:
            assert _where(await store.get_session(new.id)) == (None, None)
            assert (await store.get_session("fork")).n_events == 4
