"""Rewards: ``def|async def reward(task, answer, events) -> float``, combined by weight.

Built-ins (each 0.0 or 1.0; all 0.0 when the task has no ``answer``, except ``regex``
with ``info.regex``):

* ``exact`` — the stripped answer equals the task's answer;
* ``prefix`` — the stripped answer starts with the task's answer (pattern continuation);
* ``contains`` — the task's answer occurs in the answer;
* ``numeric`` — the first number in the answer equals the task's answer as a number;
* ``regex`` — ``info.regex`` (else the task's answer) matches somewhere in the answer;
* ``check`` — the task's ``check`` command passed (exit 0) in the rollout's working
  directory (:mod:`rolltap.rollouts.agent_check`; 0.0 for a task without one).

A task that carries ``check`` is always scored by it: the ``check`` component is added
(weight 1) when the rewards do not name it, and when the task has no ``answer`` the
built-ins that compare the answer with it (all but ``check``, and ``regex`` without
``info.regex``) are left out, having nothing to judge. Tasks without ``check`` are scored
as before.

``--reward NAME[=WEIGHT]`` repeats; a custom reward is ``module:function``. The
rollout's reward is the weighted **mean**, ``sum(w_i * r_i) / sum(w_i)``, so built-in
components keep it in [0, 1]; a rollout counts as *passed* (pass@k) at reward ≥ 1.

>>> spec = parse_reward_spec("contains=2")
>>> (spec.name, spec.weight)
('contains', 2.0)
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rolltap.errors import ConfigError, HarnessError
from rolltap.events import Event, EventKind
from rolltap.rollouts.loader import load_callable
from rolltap.rollouts.tasks import Task

__all__ = [
    "BUILTIN_REWARDS",
    "RewardFn",
    "RewardSpec",
    "Scorer",
    "parse_reward_spec",
]

RewardFn = Callable[[Task, str, Sequence[Event]], "float | Awaitable[float]"]
_NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d+)*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def exact(task: Task, answer: str, events: Sequence[Event]) -> float:
    return float(task.answer is not None and answer.strip() == task.answer.strip())


def prefix(task: Task, answer: str, events: Sequence[Event]) -> float:
    return float(task.answer is not None and answer.strip().startswith(task.answer.strip()))


def contains(task: Task, answer: str, events: Sequence[Event]) -> float:
    return float(task.answer is not None and task.answer.strip() in answer)


def _first_number(text: str) -> float | None:
    match = _NUMBER.search(text)
    if match is None:
        return None
    try:
        return float(match.group().replace(",", ""))
    except ValueError:
        return None


def numeric(task: Task, answer: str, events: Sequence[Event]) -> float:
    if task.answer is None:
        return 0.0
    got, want = _first_number(answer), _first_number(task.answer)
    if got is None or want is None:
        return 0.0
    return float(math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9))


def regex(task: Task, answer: str, events: Sequence[Event]) -> float:
    pattern = task.info.get("regex", task.answer)
    if not isinstance(pattern, str):
        return 0.0
    try:
        return float(re.search(pattern, answer) is not None)
    except re.error:
        return 0.0


class CheckNotRunError(HarnessError):
    """A task with a ``check`` was scored, but its harness ran no check (checks run in a
    working directory: ``--harness claude-code|codex`` or ``--cmd``)."""

    code = "check_not_run"


def check(task: Task, answer: str, events: Sequence[Event]) -> float:
    if task.check is None:
        return 0.0
    for event in reversed(events):
        if event.kind == EventKind.CHECK:
            return float(event.payload.get("passed") is True)
    raise CheckNotRunError(
        "the task has a check but its harness ran none: checks run in a working directory, "
        "with --harness claude-code|codex or --cmd"
    )


BUILTIN_REWARDS: dict[str, RewardFn] = {
    "exact": exact,
    "prefix": prefix,
    "contains": contains,
    "numeric": numeric,
    "regex": regex,
    "check": check,
}


@dataclass(frozen=True, slots=True)
class RewardSpec:
    """One reward component: a built-in name or ``module:function``, and its weight."""

    name: str
    weight: float = 1.0


def parse_reward_spec(text: str) -> RewardSpec:
    """``NAME`` or ``NAME=WEIGHT`` (weight > 0)."""
    name, sep, weight_text = text.partition("=")
    name = name.strip()
    if not name:
        raise ConfigError(f"invalid reward {text!r}: expected NAME[=WEIGHT]")
    weight = 1.0
    if sep:
        try:
            weight = float(weight_text)
        except ValueError:
            raise ConfigError(f"invalid reward weight in {text!r}") from None
        if not math.isfinite(weight) or weight <= 0:
            raise ConfigError(f"reward weight must be positive in {text!r}")
    return RewardSpec(name, weight)


def _resolve(name: str) -> RewardFn:
    fn: RewardFn = load_callable(name, BUILTIN_REWARDS, "reward")
    return fn


class Scorer:
    """The weighted mean of reward components; each component is reported too."""

    def __init__(self, specs: Sequence[RewardSpec]) -> None:
        if not specs:
            raise ConfigError("at least one reward is needed")
        self.specs = list(specs)
        self._fns = [_resolve(spec.name) for spec in self.specs]

    def _judging(self, task: Task) -> list[tuple[RewardSpec, RewardFn]]:
        """The components that score ``task`` (see the module docstring on ``check``)."""
        parts = list(zip(self.specs, self._fns, strict=True))
        if task.check is None:
            return parts
        if task.answer is None:
            parts = [(spec, fn) for spec, fn in parts if _judges_without_answer(spec, task)]
        if not any(spec.name == "check" for spec, _ in parts):
            parts.append((RewardSpec("check"), check))
        return parts

    async def score(
        self, task: Task, answer: str, events: Sequence[Event]
    ) -> tuple[float, dict[str, float]]:
        """``(reward, {component: value})``; a reward function's error propagates."""
        components: dict[str, float] = {}
        parts = self._judging(task)
        for spec, fn in parts:
            value: Any = fn(task, answer, events)
            if inspect.isawaitable(value):
                value = await value
            components[spec.name] = float(value)
        total = sum(spec.weight for spec, _ in parts)
        reward = sum(components[spec.name] * spec.weight for spec, _ in parts) / total
        return reward, components


#: the built-ins that compare the answer with the task's ``answer``
_ANSWER_REWARDS = frozenset({"exact", "prefix", "contains", "numeric", "regex"})


def _judges_without_answer(spec: RewardSpec, task: Task) -> bool:
    if spec.name == "regex":
        return isinstance(task.info.get("regex"), str)
    return spec.name not in _ANSWER_REWARDS
