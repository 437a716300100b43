"""A stored run's aggregates as the summary reads them.

The store keeps, per run, a bounded number of rows ``(stat, key) → (n, total, message)``
(``rolltap_run_stats``, kept up to date by every commit): sessions per ``status``,
failed sessions per ``error`` code with the earliest's message, ``reward`` and
``reward_sq`` sums, ``tokens`` (``prompt``, ``completion``), ``duration`` and the
``pass`` groups (key ``"n/c"``: tasks with ``n`` rewarded rollouts of which ``c``
passed). Reading them is the store's (``rolltap.store.rollup_read``); what they mean is
here.

>>> ro = Rollups({("status", "running"): (2, 0.0, None), ("status", "completed"): (1, 0.0, None)})
>>> ro.statuses(), Rollups(dict(ro.rows), expired=True).statuses()
({'completed': 1, 'running': 2}, {'completed': 1, 'interrupted': 2})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rolltap.results.statuses import INTERRUPTED, UNFINISHED_STATUSES

__all__ = ["RollupRow", "Rollups"]

#: ``(n, total, message)`` of one aggregate
RollupRow = tuple[int, float, str | None]


@dataclass(slots=True)
class Rollups:
    """One run's aggregate rows: ``rows[(stat, key)] = (n, total, message)``."""

    rows: dict[tuple[str, str], RollupRow] = field(default_factory=dict)
    #: whether the run's lease expired (its unfinished sessions read interrupted)
    expired: bool = False

    def n(self, stat: str, key: str = "") -> int:
        """The count of ``(stat, key)``; 0 when absent."""
        return self.rows.get((stat, key), (0, 0.0, None))[0]

    def total(self, stat: str, key: str = "") -> float:
        """The sum of ``(stat, key)``; 0.0 when absent."""
        return self.rows.get((stat, key), (0, 0.0, None))[1]

    def keyed(self, stat: str) -> dict[str, RollupRow]:
        """The rows of ``stat`` by key (those counting anything)."""
        return {k: v for (s, k), v in self.rows.items() if s == stat and v[0]}

    def statuses(self) -> dict[str, int]:
        """Sessions by status as readers see them."""
        out: dict[str, int] = {}
        for status, (n, _t, _m) in self.keyed("status").items():
            shown = INTERRUPTED if self.expired and status in UNFINISHED_STATUSES else status
            out[shown] = out.get(shown, 0) + n
        return dict(sorted(out.items()))

    def interrupted(self) -> tuple[int, int]:
        """(unfinished sessions read as interrupted, all interrupted sessions)."""
        read_so = sum(self.n("status", s) for s in UNFINISHED_STATUSES) if self.expired else 0
        return read_so, read_so + self.n("status", INTERRUPTED)

    def errors(self) -> dict[str, dict[str, Any]]:
        """Failed sessions by error code (most first), with the earliest's message."""
        found = self.keyed("error")
        ordered = sorted(found.items(), key=lambda item: (-item[1][0], item[0]))
        return {code: {"count": n, "first_message": msg} for code, (n, _t, msg) in ordered}

    def pass_groups(self) -> list[tuple[int, int, int]]:
        """``(n, c, tasks)`` groups for :func:`rolltap.results.passk.pass_at`."""
        out = []
        for key, (tasks, _t, _m) in self.keyed("pass").items():
            rewarded, passed = key.split("/")
            out.append((int(rewarded), int(passed), tasks))
        return out
