"""A stored run read under one of its scorings (``rolltap score``): which scoring a reader
picked, the summary under it, each session's result under it.

``runs show``, ``runs compare`` and the viewer read a run under a *scoring reference*:
``None`` (the default) the latest complete scoring, or the run's own rewards when it has
none; ``original`` the run's own rewards; else a scoring's name or id prefix
(:meth:`~rolltap.store.Store.resolve_scoring`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rolltap.results.rollout import RolloutResult
from rolltap.results.statuses import REWARD_ERROR
from rolltap.store import Score, ScoringInfo, Store, pick_scoring

__all__ = ["Choice", "choose", "results_under", "summary_under"]


@dataclass(frozen=True, slots=True)
class Choice:
    """The scoring a reader reads a run under (``None``: the run's own rewards) and every
    scoring the run holds."""

    chosen: ScoringInfo | None
    known: list[ScoringInfo]

    def to_dict(self) -> dict[str, Any] | None:
        """The summary's ``scoring`` entry (None for a run never scored again)."""
        if not self.known:
            return None
        info = self.chosen
        return {
            "id": info.id if info else None, "name": info.name if info else None,
            "label": info.label if info else "original", "rewards": info.rewards if info else None,
            "of": len(self.known),
        }  # fmt: skip


async def choose(store: Store, run_id: str, ref: str | None = None) -> Choice:
    """The scoring ``ref`` names for run ``run_id`` (see the module docs)."""
    known = await store.list_scorings(run_id)  # read once: the choice and the links
    return Choice(pick_scoring(run_id, known, ref), known)


async def summary_under(store: Store, run_id: str, choice: Choice) -> dict[str, Any]:
    """The run's summary under ``choice`` (its ``scoring`` entry says which), the run's
    charts but the scoring's reward chart."""
    summary = await store.run_summary(run_id)
    if choice.chosen is not None and choice.chosen.summary is not None:
        charts = {**summary.get("histograms", {})}
        charts.pop("reward", None)
        mine = choice.chosen.summary
        summary = {**mine, "histograms": {**charts, **mine.get("histograms", {})},
                   "stored": True}  # fmt: skip
    said = choice.to_dict()
    if said is not None:
        summary["scoring"] = said
    return summary


def _under(res: RolloutResult, score: Score | None) -> RolloutResult:
    if score is None:
        return res
    if score.error_code is not None:
        message = score.error_message
        return replace(res, status="error", reward=None, components={}, error=message,
                       error_code=score.error_code, error_message=message)  # fmt: skip
    if res.error_code == REWARD_ERROR and score.reward is not None:
        # its original reward raised, this scoring's did not: the harness had completed
        res = replace(res, status="completed", error=None, error_code=None, error_message=None)
    return replace(res, reward=score.reward, components=dict(score.components))


async def results_under(
    store: Store, results: Sequence[RolloutResult], choice: Choice
) -> list[RolloutResult]:
    """``results`` (a run's, from :meth:`~rolltap.store.Store.run_results`) with the
    chosen scoring's rewards, components and reward errors (as they are without one)."""
    if choice.chosen is None:
        return list(results)
    scores: Mapping[str, Score] = await store.scores(choice.chosen.id)
    return [_under(res, scores.get(res.session_id or "")) for res in results]
