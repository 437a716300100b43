"""Per-run and per-task aggregates, kept by every write that changes a session.

Pure arithmetic: a :class:`Rollup` collects what the moves of sessions between states
(:class:`Facts`) add to the ``rolltap_run_stats`` and ``rolltap_task_stats`` rows
(:mod:`rolltap.store.rollup_sql` writes them). A run's summary, histograms and task
table are then read from a bounded number of rows, whatever the run's size.

Histograms use fixed bins, so a commit can move one session between them: rewards in
bins of 1/20, durations and tokens per rollout in half-octaves (``2**(b/2)``), with
zero (or less) in a bin of its own.

>>> reward_bin(0.97), log_bin(0.0), log_bin(3.0), bin_edges(LOG, "3")
('19', 'z', '3', (2.8284271247461903, 4.0))
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from rolltap.results.passk import PASS_THRESHOLD

__all__ = [
    "LOG",
    "NO_TASK",
    "REWARD_BINS",
    "Facts",
    "Rollup",
    "bin_edges",
    "log_bin",
    "pass_key",
    "reward_bin",
]

#: the task key of sessions whose task names no id (each is its own task for pass@k)
NO_TASK = ""
#: reward bins per unit of reward
REWARD_BINS = 20
#: the scale of the duration and token bins
LOG = "log"
_ZERO = "z"
_MAX_BIN = 10**6


def reward_bin(value: float) -> str:
    return str(max(-_MAX_BIN, min(_MAX_BIN, math.floor(value * REWARD_BINS))))


def log_bin(value: float) -> str:
    if value <= 0:
        return _ZERO
    return str(max(-_MAX_BIN, min(_MAX_BIN, math.floor(2 * math.log2(value)))))


def bin_edges(scale: str, key: str) -> tuple[float, float]:
    """The [low, high) range of bin ``key`` on ``scale`` (``"log"`` or linear reward)."""
    if key == _ZERO:
        return 0.0, 0.0
    b = int(key)
    if scale == LOG:
        return 2 ** (b / 2), 2 ** ((b + 1) / 2)
    return b / REWARD_BINS, (b + 1) / REWARD_BINS


def pass_key(rewarded: int, passed: int) -> str:
    """The ``pass`` stat's key of tasks with ``rewarded`` rewards of which ``passed`` passed."""
    return f"{rewarded}/{passed}"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class Facts:
    """What the aggregates count of one session."""

    run_id: str
    task_key: str
    status: str
    created_at: float
    reward: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    duration_s: float | None = None

    @classmethod
    def of_row(cls, row: Any) -> Facts:
        """From a sessions row (a mapping with the columns' names)."""
        return cls(
            run_id=row["run_id"], task_key=row["task_id"] or NO_TASK, status=row["status"],
            created_at=row["created_at"], reward=row["reward"], error_code=row["error_code"],
            error_message=row["error_message"], prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"], duration_s=row["duration_s"],
        )  # fmt: skip

    def with_values(self, **changes: Any) -> Facts:
        return replace(self, **changes)

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


StatKey = tuple[str, str, str]  # (run id, stat, key)
TaskKey = tuple[str, str]  # (run id, task key)


class Rollup:
    """Deltas to the aggregate rows: ``stats[(run, stat, key)] = [n, total]``,
    ``tasks[(run, task)] = [rollouts, rewarded, passed, reward_sum]``, and per error
    code the message of its earliest session (``first[(run, code)] = (created_at, msg)``).

    Pass@k groups (the ``pass`` stat) of tasks with an id need the task's totals before
    and after, which only the database has (see ``rolltap.store.rollup_sql``); those of
    sessions without a task id are counted here.
    """

    def __init__(self) -> None:
        self.stats: dict[StatKey, list[float]] = defaultdict(lambda: [0, 0.0])
        self.tasks: dict[TaskKey, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
        self.first: dict[tuple[str, str], tuple[float, str | None]] = {}

    @classmethod
    def of_rows(cls, rows: Iterable[Any]) -> Rollup:
        """The aggregates of sessions ``rows`` from nothing (a rebuild or the migration)."""
        rollup = cls()
        for row in rows:
            rollup.add(Facts.of_row(row))
        rollup.close_tasks()
        return rollup

    def _stat(self, f: Facts, stat: str, key: str, sign: int, total: float = 0.0) -> None:
        cell = self.stats[(f.run_id, stat, key)]
        cell[0] += sign
        cell[1] += sign * total

    def add(self, f: Facts, sign: int = 1) -> None:
        """Count session ``f`` in (``sign`` 1) or out of (-1) the aggregates."""
        self._stat(f, "status", f.status, sign)
        if f.error_code is not None:
            self._stat(f, "error", f.error_code, sign)
            if sign > 0:
                known = self.first.get((f.run_id, f.error_code))
                if known is None or f.created_at < known[0]:
                    self.first[(f.run_id, f.error_code)] = (f.created_at, f.error_message)
        rewarded = _finite(f.reward)
        passed = rewarded and f.reward is not None and f.reward >= PASS_THRESHOLD
        reward = f.reward if rewarded and f.reward is not None else 0.0
        if rewarded:
            self._stat(f, "reward", "", sign, reward)
            self._stat(f, "reward_sq", "", sign, reward * reward)
            self._stat(f, "bin_reward", reward_bin(reward), sign)
        tokens = f.tokens
        if tokens is not None:
            self._stat(f, "tokens", "prompt", sign, float(f.prompt_tokens or 0))
            self._stat(f, "tokens", "completion", sign, float(f.completion_tokens or 0))
            self._stat(f, "bin_tokens", log_bin(tokens), sign)
        if f.duration_s is not None and _finite(f.duration_s):
            self._stat(f, "duration", "", sign, f.duration_s)
            self._stat(f, "bin_duration", log_bin(f.duration_s), sign)
        task = self.tasks[(f.run_id, f.task_key)]
        task[0] += sign
        task[1] += sign * rewarded
        task[2] += sign * passed
        task[3] += sign * reward
        if f.task_key == NO_TASK and rewarded:
            self._stat(f, "pass", pass_key(1, int(passed)), sign)

    def move(self, old: Facts | None, new: Facts | None) -> None:
        """A session went from ``old`` to ``new`` (None: it did not exist / no longer does)."""
        if old == new:
            return
        if old is not None:
            self.add(old, -1)
        if new is not None:
            self.add(new, 1)

    def move_tasks(self, run_id: str, before: tuple[int, int], after: tuple[int, int]) -> None:
        """A task's (rewarded, passed) changed: move it between pass@k groups."""
        if before == after:
            return
        if before[0] > 0:
            self.stats[(run_id, "pass", pass_key(*before))][0] -= 1
        if after[0] > 0:
            self.stats[(run_id, "pass", pass_key(*after))][0] += 1

    def close_tasks(self) -> None:
        """Count every task with an id into its pass@k group (a rebuild from nothing)."""
        for (run_id, key), (_n, rewarded, passed, _s) in self.tasks.items():
            if key != NO_TASK and rewarded > 0:
                self.stats[(run_id, "pass", pass_key(int(rewarded), int(passed)))][0] += 1

    def stat_rows(self) -> list[dict[str, Any]]:
        """The non-zero stat deltas as rows, in key order (so concurrent writers lock
        rows in one order)."""
        rows = []
        for (run_id, stat, key), (n, total) in sorted(self.stats.items()):
            first = self.first.get((run_id, key)) if stat == "error" else None
            if n == 0 and total == 0.0 and first is None:
                continue
            rows.append({
                "run_id": run_id, "stat": stat, "key": key, "n": int(n), "total": float(total),
                "message": first[1] if first else None, "first_at": first[0] if first else None,
            })  # fmt: skip
        return rows

    def task_rows(self) -> list[dict[str, Any]]:
        """The non-zero task deltas as rows, in key order."""
        return [
            {
                "run_id": run_id,
                "task_key": key,
                "rollouts": int(n),
                "rewarded": int(r),
                "passed": int(p),
                "reward_sum": float(s),
            }
            for (run_id, key), (n, r, p, s) in sorted(self.tasks.items())
            if n or r or p or s
        ]
