"""Migration 0006 (scorings, attempts, eval sets) over a store written at 0005."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rolltap.store import SchemaVersionError, Store, upgrade
from rolltap.store.engine import create_engine
from rolltap.store.url import backend_of, to_sqlalchemy_url
from store.cases_placement import downgrade_to
from store.cases_summary import fill_at_0002

_NEW_TABLES = {"rolltap_scorings", "rolltap_scores", "rolltap_eval_sets"}


def _shape(conn: Connection) -> tuple[set[str], set[str], set[str]]:
    inspector = sa.inspect(conn)
    tables = set(inspector.get_table_names())
    session_cols = {c["name"] for c in inspector.get_columns("rolltap_sessions")}
    run_cols = {c["name"] for c in inspector.get_columns("rolltap_runs")}
    return tables, session_cols, run_cols


async def _read_shape(url: str) -> tuple[set[str], set[str], set[str]]:
    engine = create_engine(to_sqlalchemy_url(url))
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_shape)
    finally:
        await engine.dispose()


class Schema0006Cases:
    async def test_migration_0006_adds_its_tables_and_columns_in_place(
        self, store_url: str
    ) -> None:
        await upgrade(store_url, "0002")
        await fill_at_0002(store_url)  # a run "run", sessions "base" and its fork "fork"
        assert await upgrade(store_url, "0005") == "0005"
        tables, session_cols, run_cols = await _read_shape(store_url)
        assert not tables & _NEW_TABLES
        assert not {"attempt", "retry_of"} & session_cols and "set_id" not in run_cols
        if backend_of(to_sqlalchemy_url(store_url)) != "sqlite":
            with pytest.raises(SchemaVersionError) as caught:
                await Store.open(store_url)
            assert caught.value.code == "store_schema_outdated"
            assert await upgrade(store_url) == "0006"
        async with await Store.open(store_url) as store:  # SQLite upgrades itself
            base = await store.get_session("base")
            assert (base.status, base.reward) == ("completed", 1.0)
            assert (await store.get_session("fork")).n_events == 4
        tables, session_cols, run_cols = await _read_shape(store_url)
        assert tables >= _NEW_TABLES
        assert {"attempt", "retry_of"} <= session_cols and "set_id" in run_cols
        # and back: the downgrade drops them, the rows stay
        await downgrade_to(store_url, "0005")
        tables, session_cols, run_cols = await _read_shape(store_url)
        assert not tables & _NEW_TABLES and "set_id" not in run_cols
        assert await upgrade(store_url) == "0006"
        async with await Store.open(store_url) as store:
            assert (await store.get_session("base")).reward == 1.0
