"""The block an ``abort`` pause cuts (:meth:`PolicyGate.cuttable`): its cancellation is the
cut's alone, consumed where it is turned into ``upstream_aborted``."""

from __future__ import annotations

import asyncio

import pytest

from rolltap.errors import UpstreamAbortedError
from rolltap.gateway.policy import PolicyGate


async def _in_flight(gate: PolicyGate, entered: asyncio.Event) -> None:
    async with gate.cuttable():
        entered.set()
        await asyncio.Event().wait()  # an upstream that never answers


async def _entered(gate: PolicyGate) -> asyncio.Task[None]:
    entered = asyncio.Event()
    task = asyncio.create_task(_in_flight(gate, entered))
    await entered.wait()
    return task


async def test_a_cut_ends_the_block_upstream_aborted_and_leaves_no_cancellation() -> None:
    gate = PolicyGate(pause_max_s=5.0)
    task = await _entered(gate)
    assert gate.snapshot()["in_flight"] == 1
    assert await gate.pause("abort") == 1
    with pytest.raises(UpstreamAbortedError):
        await task
    assert task.cancelling() == 0  # the cut's cancellation was consumed
    assert gate.snapshot()["in_flight"] == 0
    assert (gate.cut, await gate.pause("abort")) == (1, 0)  # nothing left to cut


async def test_a_cancellation_that_is_not_a_cut_stays_one() -> None:
    gate = PolicyGate(pause_max_s=5.0)
    task = await _entered(gate)
    task.cancel()  # the harness went away
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gate.snapshot()["in_flight"] == 0


async def test_a_cut_and_another_cancellation_together_stay_a_cancellation() -> None:
    gate = PolicyGate(pause_max_s=5.0)
    task = await _entered(gate)
    task.cancel()
    assert await gate.pause("abort") == 1
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelling() == 1  # the other one is not consumed


async def test_a_block_done_before_the_pause_is_not_cut() -> None:
    gate = PolicyGate(pause_max_s=5.0)
    async with gate.cuttable() as ticket:
        pass
    assert await gate.pause("abort") == 0
    assert not ticket.aborted


async def test_a_disarmed_block_is_not_cut_and_a_drain_still_waits_for_it() -> None:
    # the call's answer is whole and being written: an abort leaves it, a drain waits
    # until it is recorded (the block's end)
    gate = PolicyGate(pause_max_s=5.0)
    disarmed, end = asyncio.Event(), asyncio.Event()

    async def answered() -> None:
        async with gate.cuttable() as ticket:
            ticket.disarm()
            disarmed.set()
            await end.wait()

    async with asyncio.TaskGroup() as tasks:
        task = tasks.create_task(answered())
        await disarmed.wait()
        assert await gate.pause("abort") == 0
        assert gate.cut == 0 and gate.snapshot()["in_flight"] == 1
        draining = tasks.create_task(gate.pause("drain"))
        await asyncio.sleep(0)  # one turn: the drain starts and waits
        assert gate.snapshot()["paused"] == "drain" and not draining.done()
        end.set()
        await task
        assert await draining == 0
    assert gate.snapshot()["in_flight"] == 0
