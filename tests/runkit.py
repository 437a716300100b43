"""An eval from keyword arguments, for tests: a :class:`RunConfig` built from them, run
through the one door (``rolltap.evaluate``) in process. Tasks may be a file or a list of
:class:`Task`, the harness a name or a function, the endpoint a config, a URL or replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import rolltap
from rolltap.config import EndpointConfig
from rolltap.rollouts import Harness, Hooks, LimitsConfig, RunConfig, RunResult, Task


async def evaluate(
    tasks: str | Path | Sequence[Task],
    *,
    harness: str | Harness = "chat",
    endpoint: EndpointConfig | str | list[str] | None = None,
    n: int | None = None,
    r: int = 1,
    c: int = 16,
    rewards: Sequence[str] = ("contains",),
    store: str | None = None,
    limits: LimitsConfig | None = None,
    sampling: dict[str, Any] | None = None,
    name: str | None = None,
    hooks: Hooks | None = None,
    client: Literal["relay", "tokens"] | None = None,
    otel: bool | None = None,
    otel_content: bool = False,
    store_unavailable_timeout_s: float = 300.0,
) -> RunResult:
    """``n`` tasks × ``r`` rollouts of ``harness`` on ``tasks``, ``c`` at once."""
    from_file = isinstance(tasks, str | Path)
    task_list = None if isinstance(tasks, str | Path) else list(tasks)[:n]
    config = RunConfig(
        name=name, tasks=str(tasks) if from_file else None, n=n, r=r, c=c,
        harness=harness if isinstance(harness, str) else None,
        endpoint=None if isinstance(endpoint, EndpointConfig) else endpoint,
        rewards=list(rewards), limits=limits or LimitsConfig(), sampling=dict(sampling or {}),
        client=client, otel=otel, otel_content=otel_content,
        store=store, store_unavailable_timeout_s=store_unavailable_timeout_s,
    )  # fmt: skip
    return await rolltap.evaluate(
        config,
        tasks=task_list,
        harness=None if isinstance(harness, str) else harness,
        endpoint=endpoint if isinstance(endpoint, EndpointConfig) else None,
        hooks=hooks,
    )
