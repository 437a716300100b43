"""What an RL trainer's inference engine has for weight updates: a policy version, a pause,
and the generations in flight, which an update or a pause can abort or freeze.

:class:`Weights` is the simulator's engine state; :class:`Generation` is one request
between the pause (new requests wait there while the engine is paused) and its answer.
Nothing polls: waits end on :class:`asyncio.Event` s, and a generation's paced waits
(:meth:`Generation.until`) end early when it is aborted or frozen.

* **Abort** (``/pause?mode=abort``, ``/pause_generation`` ``abort``,
  ``/update_weight_version`` with ``abort_all_requests``): every generation in flight is
  answered at once with what it generated so far, its finish reason the route's abort.
* **Freeze** (``/pause?mode=keep``, ``/pause_generation`` ``retract`` or ``in_place``):
  generations stop where they are; their clock stops too, so after the resume they go on
  producing the same tokens at the same pace, as if the pause had not happened.
* **Wait** (``/pause?mode=wait``): the pause returns once nothing is in flight.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import orjson

from rolltap.sim.stats import Gate, StatsBoard, wait_either

__all__ = ["Generation", "PauseMode", "Weights"]

#: what a pause does to the generations in flight
PauseMode = Literal["abort", "wait", "keep"]


class Generation:
    """One generation in flight: its abort, and waits that an abort (or a freeze) ends."""

    def __init__(self, weights: Weights) -> None:
        self._weights = weights
        self._loop = asyncio.get_running_loop()
        #: set once the generation is aborted (it then answers what it has)
        self.aborted = False
        self._abort = asyncio.Event()
        # Set on an abort and when a freeze starts: it ends a paced wait early.
        self._nudge = asyncio.Event()
        self._done = asyncio.Event()
        # Seconds spent frozen: the generation's clock leaves them out.
        self._frozen_s = 0.0

    def clock(self) -> float:
        """The generation's own time (the event loop's, less the time it spent frozen)."""
        return self._loop.time() - self._frozen_s

    def abort(self) -> None:
        """Abort the generation: its waits return ``False`` from now on."""
        self.aborted = True
        self._abort.set()
        self._nudge.set()

    def nudge(self) -> None:
        """Wake a paced wait, to freeze where it is."""
        self._nudge.set()

    def finished(self) -> None:
        """The generation was answered (:meth:`Weights.finish` calls this)."""
        self._done.set()

    async def wait_finished(self) -> None:
        """Wait until the generation was answered."""
        await self._done.wait()

    async def until(self, deadline: float) -> bool:
        """Wait until :meth:`clock` reaches ``deadline``, frozen while the engine is;
        ``False`` once aborted."""
        while not self.aborted:
            if self._weights.frozen:
                await self._freeze()
                continue
            delay = deadline - self.clock()
            if delay <= 0:
                return True
            self._nudge.clear()
            try:
                async with asyncio.timeout(delay):
                    await self._nudge.wait()
            except TimeoutError:
                pass  # the deadline (or about it: the loop checks again)
        return False

    async def idle(self, seconds: float) -> bool:
        """Sleep ``seconds`` (a stall, not generation: no freeze); ``False`` once aborted."""
        try:
            async with asyncio.timeout(seconds):
                await self._abort.wait()
        except TimeoutError:
            return True
        return False

    async def hold(self, gate: Gate) -> bool:
        """Wait at ``gate`` until it opens; ``False`` once aborted."""
        await gate.hold(self._abort)
        return not self.aborted

    async def _freeze(self) -> None:
        board = self._weights.board
        since = self._loop.time()
        board.stats.frozen += 1
        await board.changed()
        try:
            await wait_either(self._weights.thawed, self._abort)
        finally:
            self._frozen_s += self._loop.time() - since
            board.stats.frozen -= 1
        await board.changed()


class Weights:
    """The engine's policy version, its pause, and the generations in flight."""

    def __init__(self, version: str | None, board: StatsBoard) -> None:
        self.board = board
        self._version = version
        #: the version as JSON (``null`` when none), as answers carry it
        self.version_json = orjson.dumps(version)
        #: while paused, new requests wait in :meth:`admit`
        self.paused = False
        #: while frozen, generations in flight stand still in :meth:`Generation.until`
        self.frozen = False
        self._resumed = asyncio.Event()
        self._resumed.set()
        #: set while not frozen
        self.thawed = asyncio.Event()
        self.thawed.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._live: set[Generation] = set()

    @property
    def version(self) -> str | None:
        """The policy (weight) version now; ``None``: none was set."""
        return self._version

    async def admit(self) -> Generation:
        """A new generation; while paused, wait for the resume first (counted as held)."""
        stats = self.board.stats
        if self.paused:
            stats.held += 1
            await self.board.changed()
            try:
                while self.paused:
                    await self._resumed.wait()
            finally:
                stats.held -= 1
        generation = Generation(self)
        self._live.add(generation)
        self._idle.clear()
        stats.generating += 1
        return generation

    def finish(self, generation: Generation) -> None:
        """``generation`` was answered (or its client went away)."""
        if generation in self._live:
            self._live.remove(generation)
            self.board.stats.generating -= 1
        generation.finished()
        if not self._live:
            self._idle.set()

    async def update(self, version: str, *, abort: bool) -> None:
        """Set the version; with ``abort``, abort every generation in flight first (their
        answers report the version that generated them) and set it once they are answered."""
        if abort:
            await self._abort_all()
        self._version = version
        self.version_json = orjson.dumps(version)
        self.board.stats.weight_updates += 1
        await self.board.changed()

    async def pause(self, mode: PauseMode) -> None:
        """Pause: new requests wait for :meth:`resume`; ``mode`` says what becomes of the
        generations in flight (returns once they are answered, or for ``keep`` frozen)."""
        self.paused = True
        self._resumed.clear()
        self.board.stats.pauses += 1
        await self.board.changed()
        if mode == "abort":
            await self._abort_all()
        elif mode == "wait":
            await self._idle.wait()
        else:
            self.frozen = True
            self.thawed.clear()
            for generation in self._live:
                generation.nudge()

    def resume(self) -> None:
        """End the pause: held requests start, frozen generations go on."""
        self.paused = self.frozen = False
        self._resumed.set()
        self.thawed.set()

    async def _abort_all(self) -> None:
        aborted = list(self._live)
        for generation in aborted:
            generation.abort()
        for generation in aborted:
            await generation.wait_finished()
