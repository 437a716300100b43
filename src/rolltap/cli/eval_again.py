"""``rolltap eval --resume RUN`` and ``--retry-failed RUN``: a stored run run again.

Both rerun a run with the config it ran with; the flags below (given now) win over it,
nothing else does. ``--resume`` finishes the rollouts that did not finish; ``--retry-failed``
runs a new attempt of each rollout whose latest attempt failed (``--retry-codes``: only
those failed with one of these codes), linked to the one it repeats, and the summary
counts one attempt per (task, sample) by ``--attempt-policy`` (stored with the run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rolltap import evaluation
from rolltap.errors import UsageError
from rolltap.results.attempts import AttemptPolicy
from rolltap.results.statuses import DONE_STATUSES
from rolltap.rollouts import Hooks, RunConfig, RunResult

__all__ = ["Again", "again_overrides", "retry_exit", "run_again"]

#: what a flag given with ``--resume``/``--retry-failed`` may change of the stored config
_OVERRIDABLE = ("c", "store_unavailable_timeout_s", "workers", "ray", "workers_per_node",
                "max_staleness", "pause_max_s")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Again:
    """The stored run an eval runs again, and how (the flags as given; None: not given)."""

    resume: str | None = None
    retry: str | None = None
    codes: list[str] | None = None
    policy: AttemptPolicy | None = None

    @property
    def run_id(self) -> str | None:
        return self.resume or self.retry

    def check(self) -> None:
        """One of ``--resume`` and ``--retry-failed`` at most; a resume takes no retry flags."""
        if self.resume is not None and self.retry is not None:
            raise UsageError(
                "--resume and --retry-failed: give one (--resume finishes the rollouts "
                "that did not finish, --retry-failed runs the failed ones again)"
            )
        if self.resume is not None and (self.codes or self.policy):
            raise UsageError(
                "--retry-codes and --attempt-policy go with --retry-failed (or a new run), "
                "not --resume: a resume keeps the run's own"
            )


def again_overrides(config: RunConfig) -> dict[str, Any]:
    """The flags given now that win over the stored run's config (given: not default)."""
    default = RunConfig()
    overrides = {
        k: getattr(config, k) for k in _OVERRIDABLE if getattr(config, k) != getattr(default, k)
    }
    if config.otel is not None:  # given now: wins over the stored run's
        overrides["otel"] = config.otel
    if config.otel_content:
        overrides["otel_content"] = True
    return overrides


async def run_again(config: RunConfig, again: Again, hooks: Hooks) -> RunResult:
    """Resume or retry ``again``'s run, the stored run's placement unless --workers/--ray
    said otherwise."""
    overrides = again_overrides(config)
    if again.retry is not None:
        return await evaluation.retry_failed(
            again.retry, store=config.store, codes=again.codes, policy=again.policy,
            overrides=overrides, hooks=hooks,
        )  # fmt: skip
    assert again.resume is not None
    return await evaluation.resume(
        again.resume, store=config.store, overrides=overrides, hooks=hooks
    )


def retry_exit(result: RunResult, codes: list[str] | None) -> tuple[bool, str | None]:
    """(whether a retry went well, what to say): nothing to retry is fine (said so); else
    at least one new attempt must be done."""
    if result.retried == 0:
        which = f" with {', '.join(codes)}" if codes else ""
        errors = result.summary.get("errors") or {}
        failed = ", ".join(f"{code} × {entry['count']}" for code, entry in errors.items())
        left = f" (its failed rollouts: {failed})" if failed else ""
        return True, f"nothing to retry: no rollout of {result.run_id} ended failed{which}{left}"
    # the new attempts come last (RunResult)
    new = result.results[len(result.results) - (result.retried or 0) :]
    return any(res.status in DONE_STATUSES for res in new), None
