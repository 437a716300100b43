"""Request events written just after their requests left (:class:`DeferredRequests`): two
turns of the loop later (aiohttp's body writer starts at the first), at most ``limit``
waiting — past them, in a burst of arrivals, at once, so no more parsed bodies pile up."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rolltap.gateway.call_events import DeferredRequests


@dataclass
class _Call:
    """Stands for a call: which turn of the loop its request event was written in."""

    turns: list[int]
    written: list[int] = field(default_factory=list)

    def flush_request(self) -> None:
        self.written.append(len(self.turns))


async def _turns(n: int, seen: list[int]) -> None:
    for i in range(1, n + 1):
        await asyncio.sleep(0)  # one turn of the loop
        seen.append(i)


async def test_written_two_turns_later() -> None:
    deferred, turns = DeferredRequests(), list[int]()
    call = _Call(turns)
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(_turns(4, turns))
        deferred.defer(call)
        assert call.written == []
    assert call.written == [1]  # after the writer task's turn, before the next
    assert deferred.waiting == 0


async def test_a_burst_past_the_limit_is_written_at_once() -> None:
    deferred, turns = DeferredRequests(limit=3), list[int]()
    calls = [_Call(turns) for _ in range(5)]
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(_turns(4, turns))
        for call in calls:
            deferred.defer(call)
        assert [c.written for c in calls] == [[], [], [], [0], [0]]
        assert deferred.waiting == 3
    assert [c.written for c in calls] == [[1], [1], [1], [0], [0]]
    assert deferred.waiting == 0
