"""``rolltap.score``: a stored run of 20 rollouts scored again, against the simulator, with
no model call — the new rewards are the ones ``eval`` computes with that function on the
same answers and events, the run's own rewards and the earlier scoring stay as they were.

The simulator answers 500 to about 30% of the calls (seeded: 7 of the 20 rollouts fail),
so failed rollouts (no answer: 0.0, as in eval) are scored beside completed ones.
"""

from __future__ import annotations

from pathlib import Path

import orjson

import rolltap
from rolltap.rollouts.config import RunConfig
from rolltap.sim import SimConfig, Simulator
from rolltap.store import ScoringInfo, Store

EVENTS = "rollout_harnesses:events_reward"


def _config(tmp_path: Path, sim: Simulator) -> RunConfig:
    path = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "prompt": f"p{i}", "info": {"regex": "[0-9]"}} for i in range(10)]
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in rows))
    return RunConfig.model_validate({
        "tasks": str(path), "harness": "chat", "endpoint": sim.base_url, "model": "sim-model",
        "r": 2, "c": 4, "rewards": ["regex", f"{EVENTS}=3"],
        "store": f"sqlite:///{tmp_path / 'runs.db'}",
    })  # fmt: skip


async def test_a_run_scored_again_needs_no_model_call_and_scores_as_eval(tmp_path: Path) -> None:
    async with Simulator(SimConfig(seed=1, faults=("status=500@0.3",))) as sim:
        config = _config(tmp_path, sim)
        url = str(config.store)
        first = await rolltap.evaluate(config)
        assert first.summary["statuses"] == {"completed": 13, "failed": 7}
        calls = sim.stats.requests
        own = {res.session_id: res for res in first.results}

        # the second reward function alone: each reward is eval's component of it
        alone = await rolltap.score(first.run_id[:8], [EVENTS], store=url, name="events")
        # the same rewards as eval: the same rewards, the same summary
        same = await rolltap.score(first.run_id, ["regex", f"{EVENTS}=3"], store=url)
        assert sim.stats.requests == calls  # not one model call

    assert len(alone.results) == len(same.results) == 20
    for res in alone.results:
        was = own[res.session_id]
        assert res.reward == was.components.get(EVENTS, 0.0), res  # failed: 0.0, no answer
        assert res.status == was.status
    assert {r.session_id: r.reward for r in same.results} == {
        sid: res.reward for sid, res in own.items()
    }
    assert sum(1 for r in alone.results if r.reward not in (0.0, 1.0)) >= 10  # events read
    for key in ("rollouts", "statuses", "reward", "pass_at_k", "errors", "model_calls"):
        assert same.summary[key] == first.summary[key], key

    async with await Store.open(url) as store:
        # the run's own rewards untouched; the first scoring unchanged by the second
        assert {s.id: s.reward for s in await store.list_sessions(first.run_id)} == {
            sid: res.reward for sid, res in own.items()
        }
        kept = await store.scores(alone.scoring.id)
        assert {sid: s.reward for sid, s in kept.items()} == {
            r.session_id: r.reward for r in alone.results
        }
        assert _found(await store.resolve_scoring(first.run_id)).id == same.scoring.id
        assert _found(await store.resolve_scoring(first.run_id, "events")).summary == alone.summary


def _found(info: ScoringInfo | None) -> ScoringInfo:
    assert info is not None
    return info
