"""What stops an eval set (:mod:`rolltap.evalset`) and makes each of its runs' hooks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rolltap.rollouts.api import Hooks, Stoppable

__all__ = ["SetControl"]


class SetControl:
    """Stops a set: no new run or retry pass starts, the runs in flight are stopped (their
    rollouts end ``cancelled``, resumable). ``hooks_for(index, name)`` makes each run's
    hooks."""

    def __init__(self, hooks_for: Callable[[int, str | None], Hooks] | None = None) -> None:
        self._hooks_for = hooks_for
        self._runners: list[Stoppable] = []
        self._stopping = asyncio.Event()

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def stop(self) -> None:
        self._stopping.set()
        for runner in self._runners:
            runner.stop()

    async def backoff(self, seconds: float) -> bool:
        """Wait ``seconds`` (a retry's backoff) unless stopped meanwhile; whether to go on."""
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return True
        return False

    def hooks(self, index: int, name: str | None) -> Hooks:
        """Run ``index``'s hooks, whose runner this control can stop."""
        hooks = self._hooks_for(index, name) if self._hooks_for else Hooks()
        theirs = hooks.on_runner

        def attach(runner: Stoppable) -> None:
            self._runners.append(runner)
            if self.stopped:
                runner.stop()
            if theirs is not None:
                theirs(runner)

        hooks.on_runner = attach
        return hooks
