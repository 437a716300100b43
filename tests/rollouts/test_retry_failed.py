"""``rolltap.retry_failed``: a new attempt of exactly the rollouts that failed, linked to the
one it repeats, against the simulator answering 500 to about 30% of the calls.

Each rollout is a tool-less chat: one model call. The simulator draws its faults from a
seeded RNG, one draw per call, so how many calls fail is fixed; which rollouts they hit
depends on the order calls arrive, so the tests read the failed set from the store and
check that exactly it, and nothing else, runs again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import orjson

import rolltap
from rolltap.rollouts import RunResult
from rolltap.rollouts.config import RunConfig
from rolltap.sim import SimConfig, Simulator
from rolltap.store import SessionInfo, Store

SEED = 1  # 7 of the first 20 calls fail, 3 of the next 7
FAULTS = ("status=500@0.3",)


def _tasks(tmp_path: Path, n: int = 10) -> Path:
    path = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "prompt": f"p{i}", "info": {"regex": "."}} for i in range(n)]
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in rows))
    return path


def _config(tmp_path: Path, sim: Simulator, **fields: object) -> RunConfig:
    return RunConfig.model_validate({
        "tasks": str(_tasks(tmp_path)), "harness": "chat", "endpoint": sim.base_url,
        "model": "sim-model", "r": 2, "c": 4, "rewards": ["regex"],
        "store": f"sqlite:///{tmp_path / 'runs.db'}", **fields,
    })  # fmt: skip


@asynccontextmanager
async def _sim(port: int = 0, faults: Sequence[str] = ()) -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=SEED, faults=tuple(faults)), port=port) as sim:
        yield sim


def _port(sim: Simulator) -> int:
    return int(sim.url.rsplit(":", 1)[1])


async def _sessions(url: str, run_id: str) -> list[SessionInfo]:
    async with await Store.open(url) as store:
        return await store.list_sessions(run_id)


def _slot(session: SessionInfo) -> tuple[str, int]:
    return session.task["task_id"], session.task["sample"]


def _latest_failed(sessions: list[SessionInfo]) -> dict[tuple[str, int], SessionInfo]:
    latest: dict[tuple[str, int], SessionInfo] = {}
    for session in sessions:
        if _slot(session) not in latest or session.attempt > latest[_slot(session)].attempt:
            latest[_slot(session)] = session
    return {slot: s for slot, s in latest.items() if s.status == "failed"}


def _new(before: list[SessionInfo], after: list[SessionInfo]) -> list[SessionInfo]:
    known = {s.id for s in before}
    return [s for s in after if s.id not in known]


def _check_linked(
    new: list[SessionInfo], failed: dict[tuple[str, int], SessionInfo], attempt: int
) -> None:
    """Exactly one new session per failed slot, the next attempt of its failed one."""
    assert sorted(_slot(s) for s in new) == sorted(failed)
    for session in new:
        repeated = failed[_slot(session)]
        assert (session.attempt, session.retry_of) == (attempt, repeated.id)
        assert repeated.attempt == attempt - 1


def _counts(result: RunResult) -> dict[str, int]:
    attempts = dict(result.summary["attempts"])
    attempts.pop("policy")
    return attempts


async def test_exactly_the_failed_rollouts_run_again_then_what_failed_again(
    tmp_path: Path,
) -> None:
    async with _sim(faults=FAULTS) as flaky:
        config = _config(tmp_path, flaky)
        url, port = str(config.store), _port(flaky)
        first = await rolltap.evaluate(config)
        assert flaky.stats.requests == 20  # one call per rollout
        before = await _sessions(url, first.run_id)
        failed = _latest_failed(before)
        assert len(failed) == 7 and first.summary["statuses"] == {"completed": 13, "failed": 7}
        assert {s.attempt for s in before} == {0}

        # a code none failed with: nothing to retry, nothing runs, nothing is stored
        none = await rolltap.retry_failed(first.run_id, store=url, codes=["upstream_timeout"])
        assert none.retried == 0 and flaky.stats.requests == 20
        assert len(await _sessions(url, first.run_id)) == 20

        # the same flaky upstream: exactly the 7 run again (7 calls), some fail again
        again = await rolltap.retry_failed(first.run_id, store=url, codes=["upstream_http_error"])
        assert again.retried == 7 and flaky.stats.requests == 27
        after = await _sessions(url, first.run_id)
        _check_linked(_new(before, after), failed, attempt=1)
        still = _latest_failed(after)
        assert len(still) == 3 and set(still) < set(failed)
        assert again.summary["rollouts"] == 20
        assert again.summary["statuses"] == {"completed": 17, "failed": 3}
        assert _counts(again) == {"sessions": 27, "slots": 20, "retried": 7, "max_attempt": 1}

    async with _sim(port=port) as healthy:  # the same address, no faults now
        third = await rolltap.retry_failed(first.run_id, store=url)
        assert third.retried == 3 and healthy.stats.requests == 3  # only what failed again
        last = await _sessions(url, first.run_id)
        _check_linked(_new(after, last), still, attempt=2)
        assert third.summary["statuses"] == {"completed": 20}
        assert third.summary["reward"] == {"mean": 1.0, "ci95": [1.0, 1.0], "n": 20}
        assert _counts(third) == {"sessions": 30, "slots": 20, "retried": 7, "max_attempt": 2}
        assert len(third.results) == 30  # every attempt, the new ones last
        assert {r.attempt for r in third.results[-3:]} == {2}

        nothing = await rolltap.retry_failed(first.run_id, store=url)
        assert nothing.retried == 0 and healthy.stats.requests == 3
        assert len(await _sessions(url, first.run_id)) == 30
    async with await Store.open(url) as store:
        stored = await store.run_summary(first.run_id)
        run = await store.get_run(first.run_id)
    assert stored["stored"] and stored["statuses"] == {"completed": 20}
    assert stored["attempts"] == third.summary["attempts"]
    assert [p["slots"] for p in run.config["retries"]] == [7, 3]
    assert run.config["retries"][0]["retry_codes"] == ["upstream_http_error"]


async def test_the_policy_given_is_stored_and_later_reads_use_it(tmp_path: Path) -> None:
    async with _sim(faults=FAULTS) as flaky:
        config = _config(tmp_path, flaky)
        first = await rolltap.evaluate(config)
        again = await rolltap.retry_failed(first.run_id, store=config.store, policy="last")
    assert again.summary["attempts"]["policy"] == "last"
    # the latest attempt of each: what failed again counts as failed
    assert again.summary["statuses"] == {"completed": 17, "failed": 3}
    async with await Store.open(config.store) as store:
        run = await store.get_run(first.run_id)
        stored = await store.run_summary(first.run_id)
    assert run.config["run"]["attempt_policy"] == "last"
    assert stored["attempts"]["policy"] == "last"


async def test_a_retry_on_workers_links_each_attempt_as_in_process(tmp_path: Path) -> None:
    async with _sim(faults=FAULTS) as flaky:
        config = _config(tmp_path, flaky)
        url, port = str(config.store), _port(flaky)
        first = await rolltap.evaluate(config, rolltap.Workers(2))
        before = await _sessions(url, first.run_id)
        failed = _latest_failed(before)
        assert len(failed) == 7
    async with _sim(port=port) as healthy:
        again = await rolltap.retry_failed(first.run_id, store=url)  # where the run ran
        assert again.retried == 7 and healthy.stats.requests == 7
    assert again.workers  # it ran on the run's worker processes again
    new = _new(before, await _sessions(url, first.run_id))
    _check_linked(new, failed, attempt=1)
    assert {s.worker_id for s in new} <= {"w0", "w1"}
    assert again.summary["statuses"] == {"completed": 20}
    assert {(r.attempt, r.retry_of) for r in again.results[-7:]} == {
        (1, failed[_slot(s)].id) for s in new
    }
