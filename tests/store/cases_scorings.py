"""Scorings (``rolltap score``) on every database: a run scored again from what is stored,
its scores and summary, picking one, the viewer under one, and deletes that take them."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from sqlalchemy import func, select

from rolltap.events import EventKind, EventLog
from rolltap.rollouts.scoring import RunNotFinishedError, score_stored
from rolltap.rollouts.scoring_read import choose, results_under, summary_under
from rolltap.store import Score, ScoringInfo, Store, StoreNotFoundError, reading
from rolltap.store.schema import scores, scorings
from rolltap.view import ViewConfig, ViewServer

#: (task id, stored status, answer, the run's own reward)
ROLLOUTS = [
    ("t0", "completed", "42 apples", 1.0),
    ("t1", "completed", "no idea", 0.0),
    ("t2", "failed", None, 0.0),
    ("t3", "cancelled", None, None),
]


def _task(task_id: str) -> dict[str, Any]:
    return {"task_id": task_id, "sample": 0,
            "task": {"id": task_id, "prompt": "how many?", "answer": "42"}}  # fmt: skip


async def _run(store: Store) -> tuple[str, dict[str, str]]:
    """A finished run as eval leaves one: each log a model call, then (for a rollout that
    ran) its reward, then its final status with the answer."""
    run = await store.create_run("scored", {"run": {"r": 1}})
    ids = {}
    for task_id, status, answer, reward in ROLLOUTS:
        session = await store.create_session(run.id, task=_task(task_id))
        log = EventLog()
        log.append(EventKind.MODEL_RESPONSE, {"status": 200})
        if reward is not None:
            log.append(EventKind.REWARD, {"reward": reward, "contains": reward})
        log.append(EventKind.STATUS, {"status": status, "answer": answer})
        await store.commit(session.id, log, status=status, reward=reward)
        ids[task_id] = session.id
    return run.id, ids


def raising_reward(task: Any, answer: str, events: Any) -> float:
    """A reward function that crashes (``store.cases_scorings:raising_reward``)."""
    raise ValueError(f"no reward for {answer!r}")


async def _count(store: Store, table: str) -> int:
    chosen = {"scores": scores, "scorings": scorings}[table]
    async with reading(store.engine) as conn:
        return int(await conn.scalar(select(func.count()).select_from(chosen)) or 0)


class ScoringCases:
    async def test_a_run_scored_again_keeps_its_own_rewards(self, store: Store) -> None:
        run_id, ids = await _run(store)
        own = await store.run_summary(run_id)
        scored = await score_stored(store, run_id, ["exact"], name="strict")
        rewards = {r.session_id: r.reward for r in scored.results}
        # exact: "42 apples" is not "42"; failed scores 0.0; cancelled is not scored
        assert rewards == {ids["t0"]: 0.0, ids["t1"]: 0.0, ids["t2"]: 0.0, ids["t3"]: None}
        assert scored.summary["reward"]["mean"] == 0.0
        assert scored.summary["statuses"] == {"cancelled": 1, "completed": 2, "failed": 1}
        again = await score_stored(store, run_id, ["contains"])
        assert {r.session_id: r.reward for r in again.results}[ids["t0"]] == 1.0
        # the run's own rewards, and the first scoring, as they were
        assert {s.id: s.reward for s in await store.list_sessions(run_id)} == {
            ids[t]: reward for t, _s, _a, reward in ROLLOUTS
        }
        assert (await store.run_summary(run_id))["reward"] == own["reward"]
        first = await store.scores(scored.scoring.id)
        assert {sid: s.reward for sid, s in first.items()} == rewards
        assert first[ids["t0"]].components == {"exact": 0.0}

    async def test_picking_a_scoring(self, store: Store) -> None:
        run_id, ids = await _run(store)
        assert await store.resolve_scoring(run_id) is None  # never scored: the run's own
        strict = await score_stored(store, run_id, ["exact"], name="strict")
        loose = await score_stored(store, run_id, ["contains=2"])
        assert _found(await store.resolve_scoring(run_id)).id == loose.scoring.id  # the latest
        assert _found(await store.resolve_scoring(run_id, "strict")).id == strict.scoring.id
        assert (
            _found(await store.resolve_scoring(run_id, strict.scoring.id[:6])).id
            == strict.scoring.id
        )
        assert await store.resolve_scoring(run_id, "original") is None
        with pytest.raises(StoreNotFoundError, match=r"no scoring named 'nope'.*strict"):
            await store.resolve_scoring(run_id, "nope")
        choice = await choose(store, run_id, "strict")
        summary = await summary_under(store, run_id, choice)
        assert summary["scoring"]["label"] == "strict" and summary["scoring"]["of"] == 2
        assert summary["reward"]["mean"] == 0.0 and "reward" in summary["histograms"]
        original = await summary_under(store, run_id, await choose(store, run_id, "original"))
        assert original["scoring"]["id"] is None
        assert original["reward"]["mean"] == pytest.approx(1 / 3)
        results = await results_under(store, await store.run_results(run_id), choice)
        assert {r.session_id: r.reward for r in results}[ids["t0"]] == 0.0
        assert [info.label for info in await store.list_scorings(run_id)] == [
            "strict", "contains=2",
        ]  # fmt: skip

    async def test_a_reward_that_raises_is_that_rollouts_reward_error(self, store: Store) -> None:
        run_id, ids = await _run(store)
        scored = await score_stored(store, run_id, ["store.cases_scorings:raising_reward"])
        by_id = {r.session_id: r for r in scored.results}
        assert (by_id[ids["t0"]].status, by_id[ids["t0"]].error_code) == ("error", "reward_error")
        assert "ValueError: no reward for '42 apples'" in (by_id[ids["t0"]].error_message or "")
        assert by_id[ids["t2"]].reward == 0.0  # failed: no answer, no call to the reward
        assert scored.summary["errors"]["reward_error"]["count"] == 2
        stored = await store.scores(scored.scoring.id)
        assert (stored[ids["t1"]].reward, stored[ids["t1"]].error_code) == (None, "reward_error")
        # scored again by a reward that works: those rollouts completed, as they had
        fixed = await score_stored(store, run_id, ["contains"])
        assert {r.session_id: r.status for r in fixed.results}[ids["t0"]] == "completed"

    async def test_refused_before_anything_is_stored(self, store: Store) -> None:
        run_id, _ = await _run(store)
        with pytest.raises(Exception, match="unknown reward 'nope'"):
            await score_stored(store, run_id, ["nope"])
        running = await store.create_session(run_id, task=_task("t9"))
        with pytest.raises(RunNotFinishedError, match="1 rollout"):
            await score_stored(store, run_id, ["exact"])
        assert await store.list_scorings(run_id) == []
        await store.commit(running.id, EventLog(), status="cancelled")

    async def test_the_viewer_reads_the_chosen_scoring(self, store: Store) -> None:
        run_id, _ = await _run(store)
        scored = await score_stored(store, run_id, ["exact"], name="strict")
        async with ViewServer(store, ViewConfig(port=0)) as server, aiohttp.ClientSession() as http:
            pages = {}
            for ref in ("", "original", "strict", "nope"):
                async with http.get(f"{server.url}runs/{run_id}?scoring={ref}") as resp:
                    pages[ref] = (resp.status, await resp.text())
        assert pages[""][0] == pages["strict"][0] == pages["original"][0] == 200
        assert 'class="scoring-link current" data-scoring="' + scored.scoring.id in pages[""][1]
        assert 'class="scoring-link current" data-scoring="original"' in pages["original"][1]
        assert pages["nope"][0] == 400 and "no scoring named" in pages["nope"][1]

    async def test_deleting_a_run_or_a_session_takes_its_scores(self, store: Store) -> None:
        run_id, ids = await _run(store)
        await score_stored(store, run_id, ["exact"])
        await store.write_scores((await store.list_scorings(run_id))[0].id, [])  # no-op
        assert (await _count(store, "scores"), await _count(store, "scorings")) == (4, 1)
        await store.delete_session(ids["t3"])
        assert await _count(store, "scores") == 3
        await store.delete_run(run_id)
        assert (await _count(store, "scores"), await _count(store, "scorings")) == (0, 0)

    async def test_scores_are_written_in_batches(self, store: Store) -> None:
        run_id, ids = await _run(store)
        info = await store.create_scoring(run_id, [{"name": "exact", "weight": 1.0}])
        many = [Score(ids[t], 0.5, {"exact": 0.5}) for t in ("t0", "t1", "t2", "t3")]
        await store.write_scores(info.id, many)
        assert {s.reward for s in (await store.scores(info.id)).values()} == {0.5}
        assert await store.scores(info.id, [ids["t1"]]) == {ids["t1"]: many[1]}
        # no summary yet (a score stopped half-way): not listed, not read
        assert await store.list_scorings(run_id) == []
        assert [i.id for i in await store.list_scorings(run_id, incomplete=True)] == [info.id]
        with pytest.raises(StoreNotFoundError, match="its scorings: none"):
            await store.resolve_scoring(run_id, info.id)
        await store.write_scoring_summary(info.id, {"rollouts": 4})
        assert _found(await store.resolve_scoring(run_id)).summary == {"rollouts": 4}
        with pytest.raises(StoreNotFoundError):
            await store.create_scoring("no-such-run", [])


def _found(info: ScoringInfo | None) -> ScoringInfo:
    assert info is not None
    return info
