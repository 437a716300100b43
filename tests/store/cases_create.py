"""Sessions admitted together are created together: a few statements a batch, each
counted as if created alone, and a bad one fails alone."""

from __future__ import annotations

import asyncio
from typing import Any

from rolltap.store import Store, StoreConflictError, StoreNotFoundError
from rolltap.store.models import SessionInfo
from store.storekit import Gate, ScriptedHooks, aggregates, count_statements, wait_until


async def _held_wave(
    store: Store, hooks: ScriptedHooks, creates: list[tuple[str, dict[str, Any]]]
) -> tuple[list[SessionInfo | BaseException], list[str]]:
    """Create ``creates`` (run id, keywords) queued behind a transaction held open, so
    that the writer takes them as one batch; their outcomes and the statements sent."""
    holder = await store.create_run("holder")
    gate = Gate()
    hooks.before.append(gate)
    first = asyncio.ensure_future(store.create_session(holder.id))
    await gate.entered.wait()
    wave = [asyncio.ensure_future(store.create_session(run, **kw)) for run, kw in creates]
    await wait_until(lambda: store.stats().queued == len(wave))
    with count_statements(store) as seen:
        gate.opened.set()
        await first
        outcomes = await asyncio.gather(*wave, return_exceptions=True)
    return outcomes, [statement for statement, _params, _many in seen.seen]


class CreateCases:
    async def test_a_wave_of_sessions_is_one_insert_and_counted_as_one_by_one(
        self, store: Store, hooks: ScriptedHooks
    ) -> None:
        batched, alone = await store.create_run("batched"), await store.create_run("alone")
        tasks = [{"id": f"t{i % 3}", "prompt": "p"} for i in range(30)] + [{"prompt": "no id"}]
        outcomes, statements = await _held_wave(
            store, hooks, [(batched.id, {"task": task}) for task in tasks]
        )
        assert all(isinstance(o, SessionInfo) for o in outcomes), outcomes
        inserts = [s for s in statements if s.upper().startswith("INSERT INTO ROLLTAP_SESSIONS")]
        assert len(inserts) == 1, statements  # was one (and six more statements) a session
        assert len(statements) < 15, statements
        for task in tasks:
            await store.create_session(alone.id, task=task)
        assert await aggregates(store, batched.id) == await aggregates(store, alone.id)
        counted = [(await store.get_run(r.id)).n_sessions for r in (batched, alone)]
        assert counted == [len(tasks)] * 2
        stored = {s.id for s in await store.list_sessions(batched.id)}
        assert stored == {o.id for o in outcomes if isinstance(o, SessionInfo)}

    async def test_a_bad_session_in_a_wave_fails_alone(
        self, store: Store, hooks: ScriptedHooks
    ) -> None:
        run = await store.create_run("wave")
        taken = await store.create_session(run.id, session_id="ro_0123456789abcdef")
        outcomes, _ = await _held_wave(store, hooks, [
            (run.id, {}), (run.id, {"session_id": taken.id}), (run.id, {}),
            ("ru_doesnotexist", {}), (run.id, {}),
        ])  # fmt: skip
        assert isinstance(outcomes[1], StoreConflictError)
        assert isinstance(outcomes[3], StoreNotFoundError)
        good = [o for i, o in enumerate(outcomes) if i not in (1, 3)]
        assert all(isinstance(o, SessionInfo) for o in good), outcomes
        # the failed two are not counted
        assert (await store.get_run(run.id)).n_sessions == 1 + len(good)
        stored = {s.id for s in await store.list_sessions(run.id)}
        assert stored == {taken.id} | {o.id for o in good if isinstance(o, SessionInfo)}
