"""How far rollouts may run ahead of the trainer: the other half of the staleness bound.

``max_staleness = K`` refuses new calls to a rollout begun K or more policy versions ago
(:meth:`~rolltap.gateway.policy.PolicyGate.check_fresh`). A trainer that uses
``rollouts_per_version = B`` rollouts per version (its batch) also must not be handed
rollouts it will only train on K or more versions after they began: the *i*-th rollout to
begin (counting from 0) is in the trainer's batch ``i // B``, trained while the policy is
at version ``first + i // B`` (``first``: the version the first rollout began under). It
begins only while that version is less than K versions past the current one, that is
while ``i < (versions since the first began + K) × B`` (AReaL's maximum off-policyness).
With K = 1 that is synchronous RL: B rollouts a version, the next B once the trainer has
published the next version.

>>> bound = AheadBound(max_staleness=1, per_version=2)
>>> bound.room(epoch=1)
2
>>> bound.begin(epoch=1, count=2)
>>> bound.room(epoch=1)
0
>>> bound.room(epoch=2)  # the trainer published the next version
2
"""

from __future__ import annotations

__all__ = ["AheadBound"]


class AheadBound:
    """Counts the rollouts begun against the versions published (see the module docs)."""

    __slots__ = ("_first_epoch", "began", "max_staleness", "per_version")

    def __init__(self, *, max_staleness: int, per_version: int) -> None:
        if max_staleness < 1 or per_version < 1:
            raise ValueError("max_staleness and per_version must be at least 1")
        self.max_staleness, self.per_version = max_staleness, per_version
        #: rollouts begun so far
        self.began = 0
        self._first_epoch: int | None = None

    @classmethod
    def of(cls, max_staleness: int | None, per_version: int | None) -> AheadBound | None:
        """The bound ``max_staleness`` and ``rollouts_per_version`` set; None: no bound."""
        if max_staleness is None or per_version is None:
            return None
        return cls(max_staleness=max_staleness, per_version=per_version)

    def room(self, epoch: int) -> int:
        """How many more rollouts may begin while the policy is in ``epoch``."""
        first = epoch if self._first_epoch is None else self._first_epoch
        allowed = (epoch - first + self.max_staleness) * self.per_version
        return max(0, allowed - self.began)

    def begin(self, epoch: int, count: int = 1) -> None:
        """``count`` rollouts begin in ``epoch`` (the caller checked :meth:`room`)."""
        if self._first_epoch is None:
            self._first_epoch = epoch
        self.began += count
