"""Eval sets (``rolltap eval-set``) on every database: a set's row, its runs linked by
``set_id``, picking one by prefix, deleting it with its runs."""

from __future__ import annotations

import pytest

from rolltap.events import EventKind, EventLog
from rolltap.store import Store, StoreNotFoundError


class SetCases:
    async def test_a_set_and_its_runs(self, store: Store) -> None:
        made = await store.create_eval_set("nightly", {"set": {"mode": "parallel"}, "runs": []})
        other = await store.create_eval_set(None, {"runs": []})
        first = await store.create_run("a", {"run": {"set_index": 0}}, set_id=made.id)
        second = await store.create_run("b", {"run": {"set_index": 1}}, set_id=made.id)
        await store.create_run("alone")
        assert (await store.get_eval_set(made.id)).config["set"] == {"mode": "parallel"}
        assert [s.id for s in await store.list_eval_sets()] == [made.id, other.id]
        assert [r.id for r in await store.set_runs(made.id)] == [first.id, second.id]
        assert (await store.get_run(first.id)).set_id == made.id
        assert (await store.get_run(first.id)).to_dict()["set_id"] == made.id
        assert await store.resolve_eval_set_id(made.id[:8]) == made.id
        with pytest.raises(StoreNotFoundError, match="no eval set 'feedface'"):
            await store.resolve_eval_set_id("feedface")

    async def test_deleting_a_set_deletes_its_runs(self, store: Store) -> None:
        made = await store.create_eval_set("s", {"runs": []})
        run = await store.create_run("a", set_id=made.id)
        session = await store.create_session(run.id)
        log = EventLog()
        log.append(EventKind.STATUS, {"status": "completed"})
        await store.commit(session.id, log, status="completed", reward=1.0)
        kept = await store.create_run("not in the set")
        assert await store.delete_eval_set(made.id) == 1
        assert await store.list_eval_sets() == []
        assert [r.id for r in await store.list_runs()] == [kept.id]
        with pytest.raises(StoreNotFoundError):
            await store.delete_eval_set(made.id)
