"""A worker's heartbeat: its stats on a fixed cadence, and memory trims beside it.

The heartbeat is how the supervisor knows the worker's event loop still turns: a
stats frame is sent every ``interval`` seconds from the loop itself, so a blocked loop
sends nothing and misses its deadline. How late the loop woke for each beat is
reported as its lag. Readings that touch ``/proc`` and the trim run on threads; the
trims have their own task, so a slow trim never delays a beat.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

from rolltap.proc.memory import Trimmer, readings
from rolltap.serve.protocol import Channel, ChannelClosedError, Msg

__all__ = ["Heartbeat"]


class Heartbeat:
    """Sends ``stats`` frames every ``interval`` seconds, with what ``trimmer`` did (the
    worker's gateway trims memory on the same cadence)."""

    def __init__(
        self,
        channel: Channel,
        interval: float,
        *,
        trimmer: Trimmer | None,
        snapshot: Callable[[], dict[str, Any]],
    ) -> None:
        self.channel, self.interval = channel, interval
        self.trimmer, self.snapshot = trimmer, snapshot
        self.beats = 0

    async def beat_forever(self) -> None:
        """Send a stats frame now, then every ``interval`` (until cancelled)."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            lag = max(0.0, loop.time() - due)
            if lag > self.interval:
                due = loop.time()  # after a stall, keep the cadence instead of bursting
            try:
                await self.channel.send(await self._stats(lag))
            except ChannelClosedError:
                return  # the supervisor is gone; the worker's receiver winds it down
            self.beats += 1
            due += self.interval
            await asyncio.sleep(max(0.0, due - loop.time()))

    async def _stats(self, lag: float) -> dict[str, Any]:
        now = await asyncio.to_thread(readings)
        trim: dict[str, Any] = {"enabled": self.trimmer is not None}
        if self.trimmer is not None:
            last = self.trimmer.last
            trim.update(available=self.trimmer.available, count=self.trimmer.count)
            if last is not None:
                trim.update(
                    released=last.released,
                    ms=round(last.seconds * 1000.0, 3),
                    thread=last.thread,
                    loop_thread=last.loop_thread,
                )
        return {
            "type": Msg.STATS,
            "pid": os.getpid(),
            "t": time.time(),
            "rss": now.rss,
            # the most this process ever held (not its parent's: see peak_rss)
            "peak_rss": now.peak_rss,
            "open_files": now.open_files,
            "sockets": now.sockets,
            "threads": now.threads,
            "loop_lag_ms": round(lag * 1000.0, 3),
            "trim": trim,
            **self.snapshot(),
        }
