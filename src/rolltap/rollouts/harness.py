"""The harness API: what a harness is given and what it returns.

A harness is ``async def harness(task: Task, ctx: HarnessContext) -> str | HarnessResult``.
It talks to the model only through the rollout's gateway URLs in ``ctx``; the runner
turns what it returns (or raises) into the rollout's answer and status. How one is
found by name: :mod:`rolltap.rollouts.harness_loader`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx2

from rolltap.events import EventLog
from rolltap.rollouts.tasks import Task

__all__ = ["Harness", "HarnessContext", "HarnessResult", "answer_of"]


@dataclass(frozen=True, slots=True)
class HarnessContext:
    """Where a harness sends its model calls, and the rollout it belongs to.

    ``api_key`` is the rollout's gateway secret (not an upstream credential).
    ``sampling`` holds the run's sampling overrides (the gateway applies them to every
    request; harnesses may pass them too). ``log`` is the rollout's event log: a harness
    may append its own events (e.g. ``harness_output``). ``http_client`` is this rollout's
    HTTP client, owned and closed by the runner and cheap to build: its requests go out
    on the run's connections (:mod:`rolltap.rollouts.harness_http`, aiohttp underneath),
    its cookies and headers are its own. Pass it to an SDK
    (``AsyncOpenAI(http_client=ctx.http_client)``) rather than letting the SDK build its
    own, which loads the CA store (tens of ms of CPU), convoys a wave of thousands of
    rollouts and parses HTTP in pure Python (see
    :func:`rolltap.rollouts.builtin.openai_client`).
    """

    rollout_id: str
    openai_base_url: str
    anthropic_base_url: str
    api_key: str
    model: str
    sampling: dict[str, Any] = field(default_factory=dict)
    log: EventLog = field(default_factory=EventLog)
    timeout_s: float | None = None
    http_client: httpx2.AsyncClient | None = None


@dataclass(frozen=True, slots=True)
class HarnessResult:
    """A harness's answer, with optional extra info kept in the rollout's result."""

    answer: str
    info: dict[str, Any] = field(default_factory=dict)


class Harness(Protocol):
    """``async def harness(task: Task, ctx: HarnessContext) -> str | HarnessResult``: any
    function of that shape, its parameters named as it likes."""

    __name__: str

    def __call__(self, task: Task, ctx: HarnessContext, /) -> Awaitable[str | HarnessResult]:
        """Run the task through the rollout's gateway; the answer."""
        ...


def answer_of(result: object) -> HarnessResult:
    """Normalise what a harness returned; raises ``TypeError`` for anything else."""
    if isinstance(result, HarnessResult):
        return result
    if isinstance(result, str):
        return HarnessResult(result)
    raise TypeError(f"a harness must return str or HarnessResult, not {type(result).__name__}")
