"""Rollouts: tasks, harnesses, rewards and the runner behind ``rolltap eval``; the
:class:`Backend` seam and :class:`InProcess` (the door itself: ``rolltap.evaluate``).

>>> import rolltap
>>> async def main() -> None:  # doctest: +SKIP
...     config = RunConfig(tasks="examples/patterns.jsonl", harness="chat", rewards=["prefix"])
...     result = await rolltap.evaluate(config, backend=InProcess())
...     print(result.summary)
"""

from rolltap.results.passk import PASS_THRESHOLD, pass_at_k
from rolltap.results.rollout import RolloutResult
from rolltap.results.summary import summarize
from rolltap.rollouts.api import Hooks, RunResult
from rolltap.rollouts.backend import Backend, InProcess
from rolltap.rollouts.config import LimitsConfig, RunConfig, load_run_config
from rolltap.rollouts.harness import Harness, HarnessContext, HarnessResult
from rolltap.rollouts.harness_loader import load_harness
from rolltap.rollouts.rewards import BUILTIN_REWARDS, RewardSpec, Scorer, parse_reward_spec
from rolltap.rollouts.runner import Runner, WorkItem
from rolltap.rollouts.subprocess_harness import command_harness
from rolltap.rollouts.tasks import Task, load_tasks

__all__ = [
    "BUILTIN_REWARDS",
    "PASS_THRESHOLD",
    "Backend",
    "Harness",
    "HarnessContext",
    "HarnessResult",
    "Hooks",
    "InProcess",
    "LimitsConfig",
    "RewardSpec",
    "RolloutResult",
    "RunConfig",
    "RunResult",
    "Runner",
    "Scorer",
    "Task",
    "WorkItem",
    "command_harness",
    "load_harness",
    "load_run_config",
    "load_tasks",
    "parse_reward_spec",
    "pass_at_k",
    "summarize",
]
