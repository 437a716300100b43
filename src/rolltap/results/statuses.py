"""The results vocabulary: how a rollout (a stored session) can end, and the error codes
a failed one is reported under.

One definition, used by the store (its ``status`` column and checks), the runner, serve
and the viewer.

:data:`STALE` is its own kind of end: a rollout refused a model call because it began
``max_staleness`` or more policy versions before the current one (``409 policy_stale``;
docs/gateway.md). It is neither done nor failed: it has no reward (its answer is not the
current policy's), counts in no error code, and ``--resume`` runs it again, under the
policy of then.

>>> is_finished("completed"), is_failed("timeout"), is_failed("completed")
(True, True, False)
>>> is_finished(STALE), is_failed(STALE), STALE in DONE_STATUSES
(True, False, False)
"""

from __future__ import annotations

__all__ = [
    "DONE_STATUSES",
    "FAILED_STATUSES",
    "HARNESS_ERROR",
    "HARNESS_RAN_STATUSES",
    "INTERRUPTED",
    "MODEL_ERROR",
    "NO_MODEL_CALLS",
    "REWARD_ERROR",
    "STALE",
    "STATUSES",
    "UNFINISHED_STATUSES",
    "is_failed",
    "is_finished",
]

#: what a session reads as once its run's lease expired while it was unfinished
INTERRUPTED = "interrupted"
#: a rollout the staleness bound ended (see the module docs): not done, not failed
STALE = "stale"

#: every status a session may have
STATUSES = frozenset(
    {
        "pending",
        "running",
        "completed",
        "limit_reached",
        "failed",
        "timeout",
        "error",
        "cancelled",
        "worker_lost",
        INTERRUPTED,
        STALE,
    }
)
#: statuses of sessions that have not finished
UNFINISHED_STATUSES = frozenset({"pending", "running"})
#: statuses counted as failures (a failed rollout has an error code: :mod:`.failure`)
FAILED_STATUSES = frozenset({"failed", "timeout", "error", "worker_lost", INTERRUPTED})
#: statuses of rollouts that ran to their end and need not run again on resume
DONE_STATUSES = frozenset({"completed", "limit_reached"})
#: statuses in which the harness ran to an end of its own (a cancelled rollout may never
#: have started it; an ``error`` one may have failed before it)
HARNESS_RAN_STATUSES = frozenset({"completed", "limit_reached", "failed", "timeout"})

#: the error code of a failed rollout whose model calls did not fail
HARNESS_ERROR = "harness_error"
#: the error code of a ``model_error`` event that named none
MODEL_ERROR = "model_error"
#: the error code of a rollout whose reward function crashed
REWARD_ERROR = "reward_error"
#: the ``note`` event's text (and the result's, the summary's field) for a rollout that
#: ended without a model call
NO_MODEL_CALLS = "no_model_calls"


def is_finished(status: str) -> bool:
    """Whether a session in ``status`` has ended."""
    return status not in UNFINISHED_STATUSES


def is_failed(status: str) -> bool:
    """Whether ``status`` counts as a failure."""
    return status in FAILED_STATUSES
