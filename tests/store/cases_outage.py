"""The writer through an outage it gives up on, and imports that merge, on each backend."""

from __future__ import annotations

import io

import pytest

from rolltap.exports import export_jsonl, import_jsonl
from rolltap.store import Store
from rolltap.store.errors import StoreUnavailableError
from rolltap.store.schema import events
from store.storekit import ScriptedHooks, assert_stored, count_rows, extend, fault, make_log


class OutageCases:
    async def test_writer_gives_up_after_the_timeout_then_recovers(self, store_url: str) -> None:
        hooks = ScriptedHooks()
        async with await Store.open(
            store_url, upgrade=True, hooks=hooks, reconnect_timeout=0.3
        ) as store:
            run = await store.create_run()
            session = await store.create_session(run.id)
            log = make_log(2)
            hooks.before.extend([fault(transient=True)] * 10_000)  # the database "stays away"
            with pytest.raises(StoreUnavailableError) as gone:
                await store.commit(session.id, log)
            assert gone.value.code == "store_unavailable" and gone.value.retryable
            stats = store.stats()
            assert (stats.pending_commits, stats.pending_bytes) == (0, 0)  # nothing held on
            assert len(await store.events(session.id)) == 0
            hooks.before.clear()  # it is back: the probe reconnects, writes flow again
            await store.wait_available()
            assert store.stats().unavailable_s is None
            extend(log, 1)
            await store.commit(session.id, log, status="completed")
            await assert_stored(store, session.id, list(log))

    async def test_import_merges_partly_stored_sessions_once(self, store: Store) -> None:
        run = await store.create_run("merge")
        session = await store.create_session(run.id)
        log = make_log(5)
        await store.commit(session.id, log, status="completed", reward=1.0)
        buf = io.BytesIO()
        await export_jsonl(store, buf, run=run.id)
        await store.delete_session(session.id)
        again = await store.create_session(run.id, session_id=session.id)
        await store.commit(again.id, log.from_events(list(log)[:2]))  # a partly stored session
        assert await import_jsonl(store, io.BytesIO(buf.getvalue()), merge=True) == 1
        assert await import_jsonl(store, io.BytesIO(buf.getvalue()), merge=True) == 0
        await assert_stored(store, session.id, list(log))
        info = await store.get_session(session.id)
        assert (info.status, info.reward) == ("completed", 1.0)
        assert await count_rows(store, events) == 5
        assert (await store.get_run(run.id)).n_finished == 1
