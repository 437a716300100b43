"""Progress and summaries for a terminal or a log: rich bar on a TTY, plain lines else."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rolltap.results.figures import fmt_ms
from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import FAILED_STATUSES
from rolltap.store import WriterStats

__all__ = ["ProgressReporter", "render_compare", "render_summary", "render_workers"]


#: while the store is away, a plain (non-TTY) progress line repeats this often (s)
_STORE_NOTE_EVERY_S = 10.0


class ProgressReporter:
    """Counts results as they land: done/total, rate, errors, mean reward — and says
    when the store is unavailable (``store unavailable for 12 s, 34 commits pending``)."""

    def __init__(self, console: Console, total: int = 0, *, label: str = "eval") -> None:
        self.console, self.label = console, label
        self.total, self.done, self.errors = total, 0, 0
        self._reward_sum, self._rewarded = 0.0, 0
        self._t0 = time.monotonic()
        self._bar: Progress | None = None
        self._task: Any = None
        self._store_note: str | None = None
        self._store_noted_at = 0.0

    def __enter__(self) -> ProgressReporter:
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=self.console,
            )  # fmt: skip
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total or None, stats="")
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def stage(self, text: str) -> None:
        """What the run is doing before its first rollout (e.g. starting the local model)."""
        if self._bar is not None:
            self._bar.update(self._task, stats=text)
        else:
            self.console.print(text, highlight=False)

    def plan(self, run_id: str, total: int) -> None:
        """The run id and how many rollouts will run."""
        self.total = total
        doing = "" if self.label == "eval" else f"{self.label} "
        self.console.print(f"{doing}run {run_id}: {total} rollouts")
        if self._bar is not None:
            self._bar.update(self._task, total=total, stats="")

    def plan_more(self, run_id: str, total: int, name: str | None = None) -> None:
        """One more run and its rollouts (an eval set's runs share one bar)."""
        self.total += total
        named = f" ({name})" if name else ""
        self.console.print(f"run {run_id}{named}: {total} rollouts", highlight=False)
        if self._bar is not None:
            self._bar.update(self._task, total=self.total)

    def _stats(self) -> str:
        rate = self.done / max(time.monotonic() - self._t0, 1e-9)
        mean = f"{self._reward_sum / self._rewarded:.3f}" if self._rewarded else "-"
        note = f" | {self._store_note}" if self._store_note else ""
        return f"{rate:.1f}/s errors {self.errors} mean reward {mean}{note}"

    def store(self, stats: WriterStats) -> None:
        """The store writer's state (about once a second): shown while it is unavailable."""
        note, was = stats.describe(), self._store_note
        self._store_note = note
        if self._bar is not None:
            if note != was:
                self._bar.update(self._task, stats=self._stats())
            return
        now = time.monotonic()
        if note is not None and (was is None or now - self._store_noted_at >= _STORE_NOTE_EVERY_S):
            self._store_noted_at = now
            self.console.print(f"done {self.done}/{self.total} {note}", highlight=False)
        elif note is None and was is not None:
            self.console.print(
                f"done {self.done}/{self.total} store available again", highlight=False
            )

    def result(self, result: RolloutResult) -> None:
        """Count one finished rollout and show the new state."""
        self.done += 1
        self.errors += result.status in FAILED_STATUSES
        if result.reward is not None:
            self._reward_sum += result.reward
            self._rewarded += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, stats=self._stats())
        elif self.total <= 1000 or self.done % max(1, self.total // 100) == 0:
            self.console.print(f"done {self.done}/{self.total} {self._stats()}", highlight=False)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _clip(message: str, limit: int = 160) -> str:
    message = " ".join(message.split())
    # escaped: a message like "[Errno 111] …" is not rich markup
    return escape(message if len(message) <= limit else message[: limit - 1] + "…")


def _rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    reward = summary["reward"]
    ci = reward.get("ci95")
    rows = [
        ("rollouts", _fmt(summary["rollouts"])),
        ("mean reward", _fmt(reward["mean"])),
        ("95% interval", f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"),
    ]
    rows += [(k, _fmt(v)) for k, v in summary.get("pass_at_k", {}).items()]
    rows += _attempts(summary.get("attempts"))
    rows += _scoring(summary.get("scoring"))
    rows += [(f"status {k}", str(v)) for k, v in summary["statuses"].items()]
    rows += [
        (f"error {code}", f"× {entry['count']}: {_clip(entry['first_message'])}")
        for code, entry in summary.get("errors", {}).items()
    ]
    rows += [
        ("model calls", _fmt(summary.get("model_calls"))),
        ("model errors", _fmt(summary.get("model_errors"))),
        ("no model calls", _fmt(summary.get("no_model_calls", 0))),
        ("token drift", _drift(summary.get("token_drift"))),
        *_versions(summary.get("policy_versions")),
        ("prompt tokens", _fmt(summary["tokens"]["prompt"])),
        ("completion tokens", _fmt(summary["tokens"]["completion"])),
    ]
    rows += [(f"latency {k}", fmt_ms(v)) for k, v in (summary.get("latency_ms") or {}).items()]
    rows += [(f"ttfc {k}", fmt_ms(v)) for k, v in (summary.get("ttfc_ms") or {}).items()]
    own = summary.get("gateway_ms") or {}
    rows += [(f"gateway overhead {k}", fmt_ms(own.get(k))) for k in ("p50", "p99") if own]
    return rows


def _attempts(found: Any) -> list[tuple[str, str]]:
    """The ``attempts`` row, only for a run retried (``rolltap eval --retry-failed``)."""
    if not isinstance(found, dict):
        return []
    said = (f"{found['retried']} of {found['slots']} rollouts retried, {found['sessions']} "
            f"sessions, up to attempt {found['max_attempt']}; counting the "
            f"{found['policy']} attempt of each")  # fmt: skip
    return [("attempts", said)]


def _scoring(found: Any) -> list[tuple[str, str]]:
    """The ``scoring`` row, only for a run scored again (``rolltap score``)."""
    if not isinstance(found, dict):
        return []
    if found.get("id") is None:
        return [("scoring", "original (the run's own rewards)")]
    said = f"{found['label']} ({str(found['id'])[:8]}; {found.get('of', 1)} scoring(s))"
    return [("scoring", _clip(said))]


def _versions(found: Any) -> list[tuple[str, str]]:
    """The ``policy versions`` row, only when an answer carried a version."""
    if not isinstance(found, dict) or not found.get("versions"):
        return []
    versions = [str(v) for v in found["versions"]]
    shown = "→".join(versions) if len(versions) <= 4 else f"{versions[0]}→…→{versions[-1]}"
    spanning = found.get("spanning", 0)
    return [("policy versions", _clip(f"{shown}; {spanning} rollout(s) span more than one"))]


def _drift(counts: Any) -> str:
    """``turns in rollouts`` of a summary's ``token_drift`` (``-`` when not known)."""
    if not isinstance(counts, dict):
        return "-"
    return f"{counts['turns']} turns in {counts['rollouts']} rollouts"


def render_summary(console: Console, run_id: str, summary: dict[str, Any]) -> None:
    """The run's id on its own line (never folded: it is copied into commands), then a
    two-column table of its summary."""
    console.print(f"run {run_id}", soft_wrap=True, highlight=False)
    table = Table(show_header=False)
    for name, value in _rows(summary):
        table.add_row(name, value)
    console.print(table)


def render_compare(console: Console, runs: dict[str, dict[str, Any]]) -> None:
    """The summaries of several runs side by side."""
    table = Table(title="compare")
    table.add_column("")
    rows: dict[str, list[str]] = {}
    for run_id, summary in runs.items():
        table.add_column(run_id)
        for name, value in _rows(summary):
            rows.setdefault(name, []).append(value)
    for name, values in rows.items():
        table.add_row(name, *values, *(["-"] * (len(runs) - len(values))))
    console.print(table)


def _mib(value: Any) -> str:
    return f"{value / 2**20:,.0f}" if isinstance(value, int | float) else "-"


def render_workers(console: Console, workers: list[dict[str, Any]]) -> None:
    """Each worker's share of the run and its last heartbeat (a run on workers)."""
    # compact: fits 80 columns (a Ray node id is shown by its first 12 characters)
    table = Table(title="workers (memory in MiB, loop lag in ms)", box=box.SIMPLE_HEAD)
    for name in ("worker", "node", "pid", "done", "restarts", "rss", "peak", "files", "lag"):
        left = name == "node"
        table.add_column(name, justify="left" if left else "right", no_wrap=True,
                         min_width=12 if left else None)  # fmt: skip
    for worker in workers:
        stats = worker.get("stats") or {}
        lag = stats.get("loop_lag_ms")
        table.add_row(
            str(worker.get("index")), str(worker.get("node") or "-")[:12],
            str(worker.get("pid") or "-"), str(worker.get("finished", 0)),
            str(worker.get("generation", 0)), _mib(stats.get("rss")),
            _mib(stats.get("peak_rss")), str(stats.get("open_files", "-")),
            f"{lag:.1f}" if isinstance(lag, int | float) else "-",
        )  # fmt: skip
    console.print(table)
