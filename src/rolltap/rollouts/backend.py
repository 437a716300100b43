"""Where an eval's rollouts run: the :class:`Backend` seam, and :class:`InProcess`.

``rolltap.evaluate(config, backend=...)`` hands one run to a backend, as an httpx client
hands a request to its transport: :class:`InProcess` runs the rollouts on this process's
event loop; ``rolltap.Workers(n)`` and ``rolltap.Ray(address)``
(:mod:`rolltap.serve.backends`) run them on worker processes or Ray actors. A backend
records itself in the run's config (its ``workers``/``ray`` fields), so a resume runs
where the run ran unless told otherwise.

>>> async def main(config: RunConfig) -> None:  # doctest: +SKIP
...     result = await InProcess().run(config, hooks=Hooks())
...     print(result.run_id, result.summary["statuses"])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rolltap.config import EndpointConfig
from rolltap.rollouts.api import Hooks, RunResult, execute
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.tasks import Task

__all__ = ["Backend", "InProcess"]


class Backend(Protocol):
    """Runs one eval (or its resume) somewhere; what ``rolltap.evaluate`` calls."""

    def placement(self) -> dict[str, Any]:
        """The run config fields that say where it runs (stored with the run)."""
        ...

    async def run(
        self,
        config: RunConfig,
        *,
        resume_run: str | None = None,
        retry_run: str | None = None,
        tasks: Sequence[Task] | None = None,
        harness: Harness | None = None,
        endpoint: EndpointConfig | None = None,
        hooks: Hooks | None = None,
    ) -> RunResult:
        """Run ``config`` (or finish ``resume_run``, or run the failed rollouts of
        ``retry_run`` again) and return every rollout's result.

        ``tasks``, ``harness`` and ``endpoint``, when given, win over what ``config``
        names (a harness function runs only in process); ``hooks`` feed a front end.
        The run's config is stored with this backend's placement in it.
        """
        ...


@dataclass(frozen=True, slots=True)
class InProcess:
    """The rollouts run in this process, ``c`` at once, on one gateway (the default)."""

    def placement(self) -> dict[str, Any]:
        """The run config fields that say so: ``workers = 0``, no ``ray`` (stored: a resume
        runs in this process too, whatever ``auto`` would pick)."""
        return {"workers": 0}

    async def run(
        self,
        config: RunConfig,
        *,
        resume_run: str | None = None,
        retry_run: str | None = None,
        tasks: Sequence[Task] | None = None,
        harness: Harness | None = None,
        endpoint: EndpointConfig | None = None,
        hooks: Hooks | None = None,
    ) -> RunResult:
        """See :meth:`Backend.run`."""
        return await execute(
            config.placed(self.placement()), tasks=tasks, resume_run=resume_run,
            retry_run=retry_run, harness=harness, endpoint=endpoint, hooks=hooks,
        )  # fmt: skip
