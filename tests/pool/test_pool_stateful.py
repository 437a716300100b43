"""A hypothesis state machine: random borrows, releases, cancellations, evictions, aclose.

Each machine drives its own pool on its own event loop (``asyncio.Runner``) and checks,
after every step, that the bound holds, that no leased (or injected) client was ever
closed, and that every lease the pool counts is one the test holds.
"""

from __future__ import annotations

import asyncio

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rolltap.errors import ModelPoolClosedError, ModelPoolFullError
from rolltap.pool import Lease, ModelClientPool

from .pool_fakes import Builder, FakeClient, identity, spin

MAX_CLIENTS = 3
KEYS = [identity(user=f"user{i % 3}", credential=f"sk-{i // 3}") for i in range(5)]
INJECTED = identity(user="fallback")


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.pool = ModelClientPool[FakeClient](MAX_CLIENTS)
        self.held: list[Lease[FakeClient]] = []
        self.violations: list[str] = []
        self.closed = False
        self.builders = {
            key: Builder(f"k{i}", on_close=self.check_close) for i, key in enumerate(KEYS)
        }
        self.injected_builder = Builder("never")
        self.external = FakeClient("external", on_close=self.check_close)
        self.pool.inject(INJECTED, self.external)

    def check_close(self, client: FakeClient) -> None:
        if client is self.external:
            self.violations.append("the injected client was closed")
        if any(lease.client is client for lease in self.held):
            self.violations.append(f"{client} closed while leased")
        if client.close_calls > 1:
            self.violations.append(f"{client} closed twice")

    def builder_for(self, key: str) -> Builder:
        return self.builders.get(key, self.injected_builder)

    def record(self, outcome: object, before_clients: int, held_keys: set[str]) -> None:
        """Check one borrow's outcome against the model and keep its lease."""
        if isinstance(outcome, Lease):
            assert not self.closed
            self.held.append(outcome)
        elif isinstance(outcome, ModelPoolFullError):
            assert not self.closed
            assert before_clients == len(held_keys - {INJECTED})  # nothing idle to evict
        elif isinstance(outcome, ModelPoolClosedError):
            assert self.closed
        elif not isinstance(outcome, asyncio.CancelledError):
            raise AssertionError(f"unexpected borrow outcome {outcome!r}")

    @rule(k=st.integers(0, len(KEYS)))
    def borrow(self, k: int) -> None:
        key = KEYS[k] if k < len(KEYS) else INJECTED
        before, held_keys = self.pool.snapshot().clients, {lease.key for lease in self.held}
        outcome: object
        try:
            outcome = self.runner.run(self.pool.borrow(key, self.builder_for(key), holder="s"))
        except (ModelPoolFullError, ModelPoolClosedError) as err:
            outcome = err
        self.record(outcome, before, held_keys)

    @precondition(lambda self: bool(self.held))
    @rule(i=st.integers(0, 1000), twice=st.booleans())
    def release(self, i: int, twice: bool) -> None:
        lease = self.held.pop(i % len(self.held))
        lease.release()
        if twice:
            lease.release()

    @rule(k=st.integers(0, len(KEYS) - 1), n=st.integers(2, 4), victim=st.integers(0, 3))
    def cancel_one_during_build(self, k: int, n: int, victim: int) -> None:
        key, builder = KEYS[k], self.builders[KEYS[k]]
        before, held_keys = self.pool.snapshot().clients, {lease.key for lease in self.held}

        async def scenario() -> list[object]:
            builder.gate = asyncio.Event()
            try:
                tasks = [
                    asyncio.create_task(self.pool.borrow(key, builder, holder=f"c{i}"))
                    for i in range(n)
                ]
                await spin(3)
                tasks[victim % n].cancel()
                builder.gate.set()
                return list(await asyncio.gather(*tasks, return_exceptions=True))
            finally:
                builder.gate = None

        for outcome in self.runner.run(scenario()):
            self.record(outcome, before, held_keys)

    @rule()
    def let_background_work_run(self) -> None:
        self.runner.run(spin(5))

    @rule(release_first=st.booleans())
    def aclose(self, release_first: bool) -> None:
        async def scenario() -> None:
            if release_first:
                self.release_all()
            closer = asyncio.create_task(self.pool.aclose())
            await spin(50)
            assert closer.done() == (not self.held)  # blocked exactly while leases are held
            self.release_all()
            await closer

        self.runner.run(scenario())
        self.closed = True
        for builder in self.builders.values():
            assert all(client.closed and client.close_calls == 1 for client in builder.built)

    def release_all(self) -> None:
        while self.held:
            self.held.pop().release()

    @invariant()
    def bounded_and_accounted(self) -> None:
        snap = self.pool.snapshot()
        assert snap.clients + snap.closing + snap.building <= MAX_CLIENTS
        assert snap.leases == len(self.held)
        assert self.violations == []
        assert all(lease.client.close_calls == 0 for lease in self.held)
        assert snap.constructions == sum(b.calls for b in self.builders.values())
        assert self.injected_builder.calls == 0
        assert snap.closed == self.closed

    def teardown(self) -> None:
        try:
            if not self.closed:
                self.release_all()
                self.runner.run(self.pool.aclose())
        finally:
            self.runner.close()


TestPoolMachine = PoolMachine.TestCase
TestPoolMachine.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
