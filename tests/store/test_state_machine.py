"""A hypothesis state machine: random appends, truncations, forks, commits and faults.

After every commit attempt the database must hold exactly each session's committed
history (forks resolved), whatever mix of appends, cuts and injected failures led there.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from rolltap.errors import StoreError
from rolltap.events import Event, EventLog
from rolltap.store import ForkDependencyError, Store
from store.storekit import ScriptedHooks, as_tuples, fault

T = TypeVar("T")
_ids = itertools.count()


@dataclass
class Model:
    log: EventLog
    committed: list[Event]
    fork_at: int = 0
    children: list[str] = field(default_factory=list)


def _first_difference(log: EventLog, committed: list[Event]) -> int:
    for i, (a, b) in enumerate(zip(log, committed, strict=False)):
        if a != b:
            return i
    return min(len(log), len(committed))


class StoreMachine(RuleBasedStateMachine):
    """Bound to a store by :func:`test_database_equals_committed_history`."""

    runner: ClassVar[asyncio.Runner]
    store: ClassVar[Store]
    hooks: ClassVar[ScriptedHooks]

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    def __init__(self) -> None:
        super().__init__()
        self.run_id = self.call(self.store.create_run()).id
        self.models: dict[str, Model] = {}
        self._new_session(None, 0)
        root = next(iter(self.models))
        self._extend(self.models[root].log, 4)
        self.call(self.store.commit(root, self.models[root].log))
        self.models[root].committed = list(self.models[root].log)

    def _new_session(self, parent: str | None, fork_at: int) -> None:
        info = self.call(self.store.create_session(self.run_id, parent=parent, fork_at=fork_at))
        base = self.models[parent].committed[:fork_at] if parent else []
        self.models[info.id] = Model(EventLog.from_events(base), list(base), fork_at)
        if parent:
            self.models[parent].children.append(info.id)

    def _pick(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(list(self.models)))  # creation order

    @staticmethod
    def _extend(log: EventLog, n: int) -> None:
        for _ in range(n):
            log.append("note", {"id": next(_ids), "text": "é" * (next(_ids) % 3)})

    @rule(data=st.data(), n=st.integers(1, 5))
    def append(self, data: st.DataObject, n: int) -> None:
        self._extend(self.models[self._pick(data)].log, n)

    @rule(data=st.data(), regrow=st.integers(0, 5))
    def rewind(self, data: st.DataObject, regrow: int) -> None:
        """Cut the history back (a rollout resumed from an earlier point), maybe regrow it."""
        log = self.models[self._pick(data)].log
        log.truncate(data.draw(st.integers(0, len(log))))
        self._extend(log, regrow)

    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        parent = self._pick(data)
        if len(self.models) < 5:
            self._new_session(parent, data.draw(st.integers(0, len(self.models[parent].committed))))

    @rule(data=st.data())
    def back_to_committed(self, data: st.DataObject) -> None:
        model = self.models[self._pick(data)]
        model.log = EventLog.from_events(model.committed)

    @rule(data=st.data(), failure=st.sampled_from([None, "fail", "lost_ack", "drop"]))
    def commit(self, data: st.DataObject, failure: str | None) -> None:
        sid = self._pick(data)
        model = self.models[sid]
        changed = _first_difference(model.log, model.committed)
        rewrite = changed < len(model.committed)
        blocked = rewrite and any(self.models[c].fork_at > changed for c in model.children)
        noop = list(model.log) == model.committed
        if failure == "fail":
            self.hooks.before.append(fault(transient=False))
        elif failure == "drop":
            self.hooks.before.append(fault(transient=True))
        elif failure == "lost_ack":
            self.hooks.after.append(fault(transient=True))
        try:
            self.call(self.store.commit(sid, model.log))
        except ForkDependencyError:
            assert blocked
        except StoreError:
            assert failure == "fail" and not noop and not blocked
        else:
            assert not blocked and (failure != "fail" or noop)
            if rewrite and changed < model.fork_at:
                model.fork_at = changed
            model.committed = list(model.log)
        finally:
            self.hooks.before.clear()
            self.hooks.after.clear()
        for other, m in self.models.items():
            assert as_tuples(self.call(self.store.events(other))) == as_tuples(m.committed), other


@pytest.mark.timeout(300)
def test_database_equals_committed_history(store_url: str) -> None:
    hooks = ScriptedHooks()
    with asyncio.Runner() as runner:
        store = runner.run(Store.open(store_url, upgrade=True, hooks=hooks))
        try:
            bound = {"runner": runner, "store": store, "hooks": hooks}
            run_state_machine_as_test(
                type("BoundStoreMachine", (StoreMachine,), bound),
                settings=settings(max_examples=25, stateful_step_count=20, deadline=None),
            )
        finally:
            runner.run(store.aclose())
