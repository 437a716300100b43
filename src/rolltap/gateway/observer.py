"""Hooks through which a rollout's owner follows it (e.g. to persist its events)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rolltap.events import Event
from rolltap.gateway.call import ModelCall
from rolltap.gateway.rollout import Rollout

__all__ = ["CallTracer", "HistoryKeeper", "RolloutAdmitter", "RolloutObserver", "history_of"]


class RolloutObserver(Protocol):
    """Called synchronously on the gateway's event loop: must not block.

    ``rollout_ended`` comes after every in-flight call of the rollout has unwound, so
    its event log is final. ``status`` is ``completed`` (unregistered) or ``cancelled``
    (aborted, or the gateway shut down under it).
    """

    def rollout_registered(self, rollout: Rollout) -> None: ...

    def call_finished(self, rollout: Rollout) -> None: ...

    def rollout_ended(self, rollout: Rollout, status: str) -> None: ...


@runtime_checkable
class RolloutAdmitter(Protocol):
    """An observer that must accept a rollout before its registration completes (e.g. a
    store recorder creating its session): whatever it raises fails the registration."""

    async def admit_rollout(self, rollout: Rollout) -> None: ...


@runtime_checkable
class HistoryKeeper(Protocol):
    """An observer that may release a rollout's durable events from memory
    (:meth:`~rolltap.events.EventLog.release`) and reads them back for whoever needs the
    whole history (e.g. :class:`rolltap.rollouts.recorder.StoreRecorder`)."""

    async def history(self, rollout: Rollout) -> list[Event]: ...


async def history_of(rollout: Rollout, observers: Sequence[RolloutObserver]) -> list[Event]:
    """``rollout``'s whole history: its log, with released events read back by the
    observer that released them."""
    if rollout.log.released:
        for observer in observers:
            if isinstance(observer, HistoryKeeper):
                return await observer.history(rollout)
    return list(rollout.log)


class CallTracer(RolloutObserver, Protocol):
    """An observer also handed each model call once it has ended (its outcome recorded),
    with the request's headers and body; e.g. :class:`rolltap.otel.tracer.GatewayTracer`.

    The gateway calls it only when one is given: with none, a call costs one ``is None``.
    """

    def call_ended(self, call: ModelCall) -> None: ...
