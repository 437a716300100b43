"""The eval backends that run rollouts on workers: :class:`Workers` and :class:`Ray`.

Each is a :class:`~rolltap.rollouts.backend.Backend` for ``rolltap.evaluate``: it
records where the run goes in the run's config (``workers``, ``ray``, …; stored, so a
resume runs there too), then starts a :class:`~rolltap.serve.supervisor.supervisor.Supervisor`
with that launcher and feeds it the run
(:class:`~rolltap.serve.supervisor.eval_driver.EvalDriver`).

>>> async def main(config: RunConfig) -> None:  # doctest: +SKIP
...     result = await rolltap.evaluate(config, backend=Workers(4))
...     result = await rolltap.evaluate(config, backend=Ray("auto", workers_per_node=2))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts.api import Hooks, RunResult
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.tasks import Task
from rolltap.serve.supervisor.eval_driver import EvalDriver

__all__ = ["Ray", "Workers"]


@dataclass(frozen=True, slots=True)
class Workers:
    """``n`` worker processes on this machine, the run's ``c`` split evenly among them
    (``rolltap eval --workers N``)."""

    n: int

    def placement(self) -> dict[str, Any]:
        """The run config fields that say so."""
        return {"workers": self.n}

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
        """See :meth:`~rolltap.rollouts.backend.Backend.run`."""
        again = _Again(resume_run, retry_run)
        return await _drive(self.placement(), config, again, tasks, harness, endpoint, hooks)


@dataclass(frozen=True, slots=True)
class Ray:
    """Ray actors on a cluster (``rolltap eval --ray ADDRESS``; needs the ``ray`` extra and
    an endpoint the nodes can reach).

    ``address``: ``"local"`` starts a cluster for the run, ``"auto"`` joins the running
    one, or a cluster address. ``workers`` in all, or ``workers_per_node`` on every node
    (neither: one per node); ``working_dir`` is uploaded to every node as the workers'
    working directory (so ``module:function`` harnesses in it import there).
    """

    address: str = "auto"
    workers: int | None = None
    workers_per_node: int | None = None
    working_dir: str | None = None

    def placement(self) -> dict[str, Any]:
        """The run config fields that say so."""
        return {
            "ray": self.address, "workers": self.workers,
            "workers_per_node": self.workers_per_node, "ray_working_dir": self.working_dir,
        }  # fmt: skip

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
        """See :meth:`~rolltap.rollouts.backend.Backend.run`."""
        again = _Again(resume_run, retry_run)
        return await _drive(self.placement(), config, again, tasks, harness, endpoint, hooks)


@dataclass(frozen=True, slots=True)
class _Again:
    """The run a resume (or a retry) runs again; neither: a new run."""

    resume_run: str | None = None
    retry_run: str | None = None


async def _drive(
    placement: dict[str, Any], config: RunConfig, again: _Again,
    tasks: Sequence[Task] | None, harness: Harness | None, endpoint: EndpointConfig | None,
    hooks: Hooks | None,
) -> RunResult:  # fmt: skip
    if harness is not None:
        # a function object cannot travel to another process: workers import it by name
        raise ConfigError(
            "workers/ray: a harness function runs only in process; "
            'name it in the run config instead (harness = "module:function")'
        )
    driver = EvalDriver(config.placed(placement), hooks or Hooks(), tasks=tasks, endpoint=endpoint)
    return await driver.run(again.resume_run, retry_run=again.retry_run)
