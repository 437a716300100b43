"""A hypothesis state machine: random borrows, releases, cancellations, evictions, aclose.

Each machine drives its own pool on its own event loop (``asyncio.Runner``). A monitor
runs beside every step and checks the bound at each loop iteration (and turns a hang
into a failure); after every step the machine also checks that no leased (or injected)
client was ever closed and that every lease the pool counts is one the test holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pool.pool_fakes import Builder, FakeClient, identity, spin
from rolltap.errors import ModelPoolClosedError, ModelPoolFullError
from rolltap.pool import Lease, ModelClientPool

T = TypeVar("T")

MAX_CLIENTS = 3
KEYS = [identity(user=f"user{i % 3}", credential=f"sk-{i // 3}") for i in range(5)]
INJECTED = identity(user="fallback")
ALL_KEYS = [*KEYS, INJECTED]
MAX_LOOP_ITERATIONS = 20_000


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.pool = ModelClientPool[FakeClient](MAX_CLIENTS)
        self.held: list[Lease[FakeClient]] = []
        self.churning: list[Lease[FakeClient]] = []  # leases held inside one step
        self.violations: list[str] = []
        self.closed = False
        self.builders = {
            key: Builder(f"k{i}", on_close=self.check_close, close_yields=3)
            for i, key in enumerate(KEYS)
        }
        self.injected_builder = Builder("never")
        self.external = FakeClient("external", on_close=self.check_close)
        self.pool.inject(INJECTED, self.external)

    # -- helpers ------------------------------------------------------------------

    def check_close(self, client: FakeClient) -> None:
        if client is self.external:
            self.violations.append("the injected client was closed")
        if any(lease.client is client for lease in [*self.held, *self.churning]):
            self.violations.append(f"{client} closed while leased")
        if client.close_calls > 1:
            self.violations.append(f"{client} closed twice")

    def check_bound(self) -> None:
        snap = self.pool.snapshot()
        assert snap.clients + snap.closing + snap.building <= MAX_CLIENTS, snap
        assert self.violations == []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one step to quiescence, checking the bound at every loop iteration."""

        def quiet() -> bool:
            snap = self.pool.snapshot()
            return snap.building == snap.closing == snap.waiting == 0

        async def monitored() -> T:
            task = asyncio.create_task(coro)
            for _ in range(MAX_LOOP_ITERATIONS):
                self.check_bound()
                if task.done() and quiet():  # no background work is left between steps
                    return task.result()
                await asyncio.sleep(0)
            task.cancel()
            raise AssertionError("the pool made no progress")

        return self.runner.run(monitored())

    async def checked_borrow(self, key: str, holder: str) -> object:
        """Borrow; a refusal is returned (and checked at the instant it is raised)."""
        try:
            return await self.pool.borrow(
                key, self.builders.get(key, self.injected_builder), holder=holder
            )
        except ModelPoolFullError as err:
            snap = self.pool.snapshot()
            assert snap.clients + snap.building + snap.closing == MAX_CLIENTS, snap
            assert not self.closed
            return err
        except ModelPoolClosedError as err:
            assert self.closed
            return err

    def keep(self, outcomes: list[object]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, Lease):
                self.held.append(outcome)
            elif not isinstance(outcome, ModelPoolFullError | ModelPoolClosedError):
                assert isinstance(outcome, asyncio.CancelledError), outcome

    def release_all(self) -> None:
        while self.held:
            self.held.pop().release()

    # -- rules --------------------------------------------------------------------

    @rule(k=st.integers(0, len(ALL_KEYS) - 1))
    def borrow(self, k: int) -> None:
        idle_owned = self.pool.snapshot().clients - len(
            {lease.key for lease in self.held} - {INJECTED}
        )
        outcome = self.run(self.checked_borrow(ALL_KEYS[k], "seq"))
        if isinstance(outcome, ModelPoolFullError):
            assert idle_owned == 0  # an idle client would have been evicted instead
        self.keep([outcome])

    @rule(ks=st.lists(st.integers(0, len(ALL_KEYS) - 1), min_size=2, max_size=6), c=st.integers())
    def borrow_concurrently(self, ks: list[int], c: int) -> None:
        async def scenario() -> list[object]:
            tasks = [
                asyncio.create_task(self.checked_borrow(ALL_KEYS[k], f"c{i}"))
                for i, k in enumerate(ks)
            ]
            await spin(1 + c % 3)
            if c % 2:
                tasks[c % len(tasks)].cancel()
            return list(await asyncio.gather(*tasks, return_exceptions=True))

        self.keep(self.run(scenario()))

    @rule(shift=st.integers(0, len(KEYS) - 1), hold=st.integers(0, 3))
    def churn(self, shift: int, hold: int) -> None:
        """Every key at once, each held briefly: evictions overlap constructions."""

        async def one(key: str) -> object:
            outcome = await self.checked_borrow(key, "churn")
            if isinstance(outcome, Lease):
                self.churning.append(outcome)
                await spin(hold)
                self.churning.remove(outcome)
                outcome.release()
            return outcome

        async def scenario() -> list[object]:
            keys = KEYS[shift:] + KEYS[:shift]
            return list(await asyncio.gather(*(one(key) for key in keys), return_exceptions=True))

        for outcome in self.run(scenario()):
            assert isinstance(outcome, Lease | ModelPoolFullError | ModelPoolClosedError), outcome

    @rule(k=st.integers(0, len(KEYS) - 1))
    def failing_build(self, k: int) -> None:
        builder, error = self.builders[KEYS[k]], RuntimeError("build failed")

        async def attempt() -> object:
            builder.error = error
            try:
                return await self.checked_borrow(KEYS[k], "fail")
            except RuntimeError as err:
                return err
            finally:
                builder.error = None

        calls = builder.calls
        outcome = self.run(attempt())
        if outcome is error:
            assert builder.calls == calls + 1
        else:
            assert builder.calls == calls  # the key was live (lent without building) or refused
            self.keep([outcome])

    @precondition(lambda self: bool(self.held))
    @rule(i=st.integers(0, 1000), twice=st.booleans())
    def release(self, i: int, twice: bool) -> None:
        lease = self.held.pop(i % len(self.held))
        lease.release()
        if twice:
            lease.release()

    @rule(k=st.integers(0, len(KEYS) - 1), n=st.integers(2, 4), victim=st.integers(0, 3))
    def cancel_one_during_build(self, k: int, n: int, victim: int) -> None:
        builder = self.builders[KEYS[k]]

        async def scenario() -> list[object]:
            builder.gate = asyncio.Event()
            try:
                tasks = [
                    asyncio.create_task(self.checked_borrow(KEYS[k], f"b{i}")) for i in range(n)
                ]
                await spin(3)
                tasks[victim % n].cancel()
                builder.gate.set()
                return list(await asyncio.gather(*tasks, return_exceptions=True))
            finally:
                builder.gate = None

        self.keep(self.run(scenario()))

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

        self.run(scenario())
        self.closed = True
        for builder in self.builders.values():
            assert all(client.closed and client.close_calls == 1 for client in builder.built)

    # -- invariants ---------------------------------------------------------------

    @invariant()
    def bounded_and_accounted(self) -> None:
        self.check_bound()
        snap = self.pool.snapshot()
        assert snap.leases == len(self.held)
        assert all(lease.client.close_calls == 0 for lease in self.held)
        assert snap.constructions == sum(b.calls for b in self.builders.values())
        assert self.injected_builder.calls == 0
        assert snap.closed == self.closed

    def teardown(self) -> None:
        try:
            if not self.closed:
                self.release_all()
                self.run(self.pool.aclose())
        finally:
            self.runner.close()


TestPoolMachine = PoolMachine.TestCase
TestPoolMachine.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
