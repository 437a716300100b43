"""An endpoint's policy: the version of the weights behind it, and its pauses.

A trainer that updates weights while rollouts run tells the gateway (``POST /policy``,
``POST /pause``, ``POST /resume`` on the admin API; :meth:`~rolltap.gateway.gateway.
Gateway.set_policy_version`, ``pause``, ``resume`` in Python). Each endpoint has one
:class:`PolicyGate`:

- **version**: an opaque string (None until set). Each change starts a new *epoch*;
  staleness counts epochs (``max_staleness``). With ``rollouts_per_version`` too, a new
  rollout's first call also waits here while the rollouts begun are too far ahead of the
  trainer (:mod:`rolltap.gateway.ahead`), until a new version or ``pause_max_s``.
- **pause**: while paused, a call about to be sent waits here, in arrival order, for at
  most ``pause_max_s`` (then ``503 paused``): the harness sees a slow call. ``hold`` lets
  the upstream requests in flight run on; ``drain`` returns once none is left in flight;
  ``abort`` cuts them at once (:meth:`PolicyGate.cuttable`: a relayed call gets
  ``upstream_aborted``, the token client continues its completion after the resume).
- **in flight**: the upstream requests between the gate and the end of their answer.

>>> async def main() -> None:  # doctest: +SKIP
...     gate = PolicyGate(pause_max_s=60.0)
...     gate.set_version("step-7")
...     await gate.pause("drain")  # returns once nothing is in flight
...     gate.resume()
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal, get_args

from rolltap.clients.weight_version import reported_version
from rolltap.errors import (
    InvalidRequestError,
    PausedError,
    PolicyStaleError,
    UpstreamAbortedError,
)
from rolltap.gateway.ahead import AheadBound

__all__ = [
    "PAUSE_MODES", "InFlight", "PauseMode", "PolicyGate", "parse_pause_mode", "reported_version",
]  # fmt: skip

PauseMode = Literal["hold", "drain", "abort"]
PAUSE_MODES: tuple[PauseMode, ...] = get_args(PauseMode)
#: what a call refused after ``pause_max_s`` is told to wait before it tries again
_RETRY_AFTER_S = 1.0


def parse_pause_mode(value: Any) -> PauseMode:
    """``value`` as a pause mode, or ``InvalidRequestError`` naming the modes."""
    for mode in PAUSE_MODES:
        if value == mode:
            return mode
    raise InvalidRequestError(
        f"must be one of {', '.join(PAUSE_MODES)}, got {value!r}", field="mode"
    )


class InFlight:
    """One upstream request in flight, as the block it runs in (:meth:`PolicyGate.
    cuttable`): a ``drain`` waits for the block's end; an ``abort`` cuts it (a
    :class:`~rolltap.clients.upstream.Cut`) until its answer is whole (:meth:`disarm`).

    A cut cancels the task in the block, which gets ``CancelledError`` wherever it waits;
    the block turns that cancellation (and only that one: another, such as the harness
    going away, stays a cancellation) into :class:`~rolltap.errors.UpstreamAbortedError`.
    A plain class, not a generator: every call to an endpoint runs one."""

    __slots__ = ("aborted", "armed", "cancelling", "gate", "task")

    def __init__(self, gate: PolicyGate) -> None:
        self.gate, self.aborted, self.armed, self.cancelling = gate, False, True, 0
        self.task: asyncio.Task[Any] | None = None

    def cut(self) -> bool:
        """Cut the block's request, unless it is cut already, over or :meth:`disarm`-ed;
        whether it was cut."""
        if self.aborted or not self.armed or self.task is None:
            return False
        self.aborted = True
        self.task.cancel()
        return True

    def disarm(self) -> None:
        """The request is over, its answer whole: an abort no longer cuts the block, and a
        drain still waits for its end (where the answer is recorded)."""
        self.armed = False

    async def __aenter__(self) -> InFlight:
        task = self.task = asyncio.current_task()
        self.cancelling = 0 if task is None else task.cancelling()
        self.gate.entered(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        self.gate.left(self)
        task, self.task = self.task, None
        if not self.aborted or task is None:
            return
        # the cut's own cancellation is consumed here (as asyncio.timeout does its own)
        if task.uncancel() <= self.cancelling and exc_type is asyncio.CancelledError:
            raise UpstreamAbortedError("an abort pause cut the upstream request") from None


class PolicyGate:
    """The policy version of one endpoint and its pause (see the module's docstring)."""

    def __init__(
        self,
        *,
        pause_max_s: float,
        max_staleness: int | None = None,
        rollouts_per_version: int | None = None,
    ) -> None:
        self.pause_max_s, self.max_staleness = pause_max_s, max_staleness
        self.ahead = AheadBound.of(max_staleness, rollouts_per_version)
        self._version: str | None = None
        #: bumped on every change of version
        self.epoch = 0
        self._epochs: dict[str, int] = {}
        #: set (and replaced) on every change of version: new rollouts held ahead wake
        self._versioned = asyncio.Event()
        self.mode: PauseMode | None = None
        self._paused_at: float | None = None
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._inflight: set[InFlight] = set()
        #: calls waiting for a resume now, new rollouts waiting for a version; pauses so
        #: far, requests cut, calls refused
        self.held = self.held_ahead = 0
        self.pauses = self.cut = self.refused = 0

    # -- version -------------------------------------------------------------------

    @property
    def version(self) -> str | None:
        return self._version

    def set_version(self, version: str | None) -> bool:
        """Make ``version`` current; whether it changed (a change is a new epoch)."""
        if version == self._version:
            return False
        self._version = version
        self.epoch += 1
        if version is not None:
            self._epochs.setdefault(version, self.epoch)
        self._versioned.set()
        self._versioned = asyncio.Event()
        return True

    def epoch_of(self, version: str | None) -> int:
        """The epoch ``version`` was first made current in (the current epoch for a
        version the trainer never set, such as an engine's own)."""
        if version is None:
            return self.epoch
        return self._epochs.get(version, self.epoch)

    def begin(self) -> int:
        """A rollout's first call leaves the gate: count it (the ahead bound); its epoch."""
        if self.ahead is not None:
            self.ahead.begin(self.epoch)
        return self.epoch

    def check_fresh(self, first_epoch: int) -> None:
        """Raise :class:`~rolltap.errors.PolicyStaleError` for a rollout whose first call
        was made in ``first_epoch``, when that is ``max_staleness`` or more epochs ago."""
        k = self.max_staleness
        if k is not None and self.epoch - first_epoch >= k:
            raise PolicyStaleError(
                f"the rollout began {self.epoch - first_epoch} policy versions ago "
                f"(max_staleness = {k})"
            )

    # -- pause ---------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self.mode is not None

    async def pause(self, mode: PauseMode, *, cut: bool = True) -> int:
        """Pause: new calls wait. ``drain`` returns once nothing is in flight; ``abort``
        cuts what is (unless not ``cut``: the engine aborts them itself). Returns how
        many upstream requests were cut."""
        if self.mode is None:
            self._paused_at = time.monotonic()
            self.pauses += 1
        self.mode = mode
        self._open.clear()
        cuts = 0
        if mode == "abort" and cut:
            cuts = sum(ticket.cut() for ticket in list(self._inflight))
            self.cut += cuts
        elif mode == "drain":
            await self._idle.wait()
        return cuts

    def resume(self) -> bool:
        """Let held calls go, in the order they arrived; whether the gate was paused."""
        was = self.mode is not None
        self.mode, self._paused_at = None, None
        self._open.set()
        return was

    async def wait_open(self, *, begins: bool = False) -> None:
        """Return at once unless paused (or, for the first call of a rollout that
        ``begins``, unless rollouts are too far ahead of the trainer); else when resumed
        (in arrival order) or a new version makes room, or raise
        :class:`~rolltap.errors.PausedError` after ``pause_max_s``."""
        if self._open.is_set() and not (begins and self._ahead_full()):
            return
        ahead = self._open.is_set()
        if ahead:
            self.held_ahead += 1
        else:
            self.held += 1
        try:
            async with asyncio.timeout(self.pause_max_s):
                # woken by a resume, it may find a new pause begun before it ran: then
                # it waits on (not sent into the new pause)
                while True:
                    if not self._open.is_set():
                        await self._open.wait()
                    elif begins and self._ahead_full():
                        await self._versioned.wait()
                    else:
                        return
        except TimeoutError:
            self.refused += 1
            raise PausedError(self._refusal(ahead), retry_after=_RETRY_AFTER_S) from None
        finally:
            if ahead:
                self.held_ahead -= 1
            else:
                self.held -= 1

    def _ahead_full(self) -> bool:
        return self.ahead is not None and self.ahead.room(self.epoch) == 0

    def _refusal(self, ahead: bool) -> str:
        bound = self.ahead
        if not ahead or bound is None:
            return f"the endpoint is paused, and stayed so for pause_max_s = {self.pause_max_s}s"
        return (
            f"a new rollout waited pause_max_s = {self.pause_max_s}s for a new policy "
            f"version: {bound.began} rollouts began, as many as max_staleness = "
            f"{bound.max_staleness} versions of rollouts_per_version = {bound.per_version} "
            "allow"
        )

    @asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """:meth:`wait_open` as a block (the :class:`~rolltap.clients.upstream.CallGate`
        shape)."""
        await self.wait_open()
        yield

    def cuttable(self) -> InFlight:
        """An upstream request in flight, as a block: ``drain`` waits for it, ``abort``
        cuts it (the ticket's ``aborted`` is set and the block ends with
        :class:`~rolltap.errors.UpstreamAbortedError`)."""
        return InFlight(self)

    def entered(self, ticket: InFlight) -> None:
        """``ticket``'s request is in flight (its block entered)."""
        self._inflight.add(ticket)
        self._idle.clear()

    def left(self, ticket: InFlight) -> None:
        """``ticket``'s block ended: a drain waiting for the last one returns."""
        self._inflight.discard(ticket)
        if not self._inflight:
            self._idle.set()

    # -- report --------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The gate as ``GET /policy`` shows it."""
        since = self._paused_at
        return {
            "version": self._version,
            "epoch": self.epoch,
            "paused": self.mode,
            "paused_for_s": None if since is None else round(time.monotonic() - since, 3),
            "in_flight": len(self._inflight),
            "held": self.held,
            "pauses": self.pauses,
            "cut": self.cut,
            "refused": self.refused,
            "max_staleness": self.max_staleness,
            "rollouts_per_version": None if self.ahead is None else self.ahead.per_version,
            "began": None if self.ahead is None else self.ahead.began,
            "held_ahead": self.held_ahead,
        }
