"""``rolltap.eval_set``: three runs under one set id against the simulator — stopped
mid-way and resumed (each rollout slot run once per attempt, the set's summary the sum of
its runs'), failed rollouts retried up to ``retries`` passes, runs in parallel sharing ``c``,
and the set file's mistakes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

import rolltap
from rolltap.errors import ConfigError
from rolltap.evalset import SetControl, SetResult
from rolltap.results.rollout import RolloutResult
from rolltap.rollouts import Hooks
from rolltap.rollouts.evalset_config import load_eval_set
from rolltap.sim import SimConfig, Simulator
from rolltap.store import Store

FAULTS = ("status=500@0.3",)


def _set_file(tmp_path: Path, sim: Simulator, body: str) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "prompt": f"p{i}", "info": {"regex": "."}} for i in range(5)]
    tasks.write_bytes(b"\n".join(orjson.dumps(row) for row in rows))
    path = tmp_path / "set.toml"
    path.write_text(
        f'name = "s"\nstore = "sqlite:///{tmp_path / "runs.db"}"\nretry_backoff_s = 0\n{body}\n'
        f'[defaults]\ntasks = "tasks.jsonl"\nharness = "chat"\nendpoint = "{sim.base_url}"\n'
        'model = "m"\nr = 2\n'
        '[[runs]]\nname = "a"\nrewards = ["regex"]\n'
        '[[runs]]\nname = "b"\nrewards = ["contains"]\n'
        '[[runs]]\nname = "c"\nrewards = ["regex"]\nr = 4\n'
    )
    return path


async def _slots(url: str, result: SetResult) -> dict[str, Counter[tuple[Any, ...]]]:
    """Per run: how many sessions each (task, sample, attempt) has."""
    async with await Store.open(url) as store:
        return {
            run.run_id: Counter((s.task["task_id"], s.task["sample"], s.attempt)
                                for s in await store.list_sessions(run.run_id))
            for run in result.runs if run.run_id
        }  # fmt: skip


def _check_sum(result: SetResult) -> None:
    """The set's summary is the sum of its runs'."""
    total = result.summary
    assert total["rollouts"] == sum(r.summary["rollouts"] for r in result.runs)
    statuses: Counter[str] = Counter()
    for run in result.runs:
        statuses.update(run.summary["statuses"])
    assert total["statuses"] == dict(statuses)
    n = sum(r.summary["reward"]["n"] for r in result.runs)
    mean = sum(r.summary["reward"]["mean"] * r.summary["reward"]["n"] for r in result.runs) / n
    assert (total["reward"]["n"], total["reward"]["mean"]) == (n, pytest.approx(mean))
    assert total["tokens"]["completion"] == sum(r.summary["tokens"]["completion"]
                                                 for r in result.runs)  # fmt: skip


async def test_a_set_stopped_mid_way_and_resumed_runs_each_rollout_once(tmp_path: Path) -> None:
    async with Simulator(SimConfig(seed=1)) as sim:
        path = _set_file(tmp_path, sim, "c = 2")
        url = str(load_eval_set(path)[0].store)
        seen: list[RolloutResult] = []

        def hooks_for(index: int, name: str | None) -> Hooks:
            def landed(result: RolloutResult) -> None:
                seen.append(result)
                if len(seen) == 14:  # the second run's fourth rollout
                    control.stop()

            return Hooks(on_result=landed)

        control = SetControl(hooks_for)
        first = await rolltap.eval_set(path, control=control)
        assert first.interrupted and not first.ok
        assert [bool(r.run_id) for r in first.runs] == [True, True, False]
        assert [r.interrupted for r in first.runs] == [False, True, True]
        calls = sim.stats.requests

        again = await rolltap.resume_eval_set(first.set_id[:8], store=url)
        assert not again.interrupted and again.ok
        assert again.runs[0].run_id == first.runs[0].run_id  # finished: left as it was
        assert again.runs[1].run_id == first.runs[1].run_id  # resumed, not run anew
        # the first run is not run again; the second only what it had left; the third whole
        assert sim.stats.requests - calls <= 10 - 3 + 20

    slots = await _slots(url, again)
    assert [sum(c.values()) for c in slots.values()] == [10, 10, 20]
    assert all(n == 1 for c in slots.values() for n in c.values())  # once per attempt
    assert [r.summary["statuses"] for r in again.runs] == [
        {"completed": 10}, {"completed": 10}, {"completed": 20},
    ]  # fmt: skip
    _check_sum(again)
    async with await Store.open(url) as store:
        assert [r.set_id for r in await store.set_runs(again.set_id)] == [again.set_id] * 3
    shown = await rolltap.resume_eval_set(again.set_id, store=url)  # nothing left
    assert [r.run_id for r in shown.runs] == [r.run_id for r in again.runs]
    assert shown.summary == again.summary


async def test_a_parallel_set_stopped_and_resumed_keeps_c_and_runs_each_rollout_once(
    tmp_path: Path,
) -> None:
    # stopped while every run waits on the shared places: none may hang on them, and
    # the resumed set still keeps to c
    async with Simulator(SimConfig(seed=1, ttft_ms=5)) as sim:
        path = _set_file(tmp_path, sim, 'c = 3\nmode = "parallel"')
        url = str(load_eval_set(path)[0].store)
        seen: list[RolloutResult] = []

        def hooks_for(index: int, name: str | None) -> Hooks:
            def landed(result: RolloutResult) -> None:
                seen.append(result)
                if len(seen) == 12:
                    control.stop()

            return Hooks(on_result=landed)

        control = SetControl(hooks_for)
        first = await rolltap.eval_set(path, control=control)
        assert first.interrupted
        again = await rolltap.resume_eval_set(first.set_id, store=url)
        peak = sim.stats.peak_in_flight
    assert again.ok and not again.interrupted and peak <= 3
    slots = await _slots(url, again)
    assert [sum(c.values()) for c in slots.values()] == [10, 10, 20]
    assert all(n == 1 for c in slots.values() for n in c.values())  # once per attempt
    _check_sum(again)


async def test_failed_rollouts_are_retried_up_to_retries_passes(tmp_path: Path) -> None:
    async with Simulator(SimConfig(seed=1, faults=FAULTS)) as flaky:
        path = _set_file(tmp_path, flaky, "c = 4\nretries = 2")
        url = str(load_eval_set(path)[0].store)
        done = await rolltap.eval_set(path)
    slots = await _slots(url, done)
    async with await Store.open(url) as store:
        for run in done.runs:
            assert run.run_id is not None
            info = await store.get_run(run.run_id)
            assert info.retries == run.retried <= 2
            sessions = await store.list_sessions(run.run_id)
            by_id = {s.id: s for s in sessions}
            for s in sessions:
                if s.attempt:
                    repeated = by_id[s.retry_of or ""]
                    assert repeated.attempt == s.attempt - 1 and repeated.status == "failed"
            assert all(n == 1 for n in slots[run.run_id].values())
    assert sum(r.retried for r in done.runs) >= 3  # faults hit every run at least once
    _check_sum(done)


async def test_runs_in_parallel_share_c(tmp_path: Path) -> None:
    # each call takes a while, so the runs' rollouts overlap: three runs with a part of
    # c each (at least 1) would have 3 in flight; one shared pool of 2 never does
    async with Simulator(SimConfig(seed=1, ttft_ms=100)) as sim:
        path = _set_file(tmp_path, sim, 'c = 2\nmode = "parallel"')
        done = await rolltap.eval_set(path)
        peak = sim.stats.peak_in_flight
    assert done.ok and [r.summary["rollouts"] for r in done.runs] == [10, 10, 20]
    assert peak == 2
    async with await Store.open(str(load_eval_set(path)[0].store)) as store:
        cs = [(await store.get_run(r.run_id or "")).config["run"]["c"] for r in done.runs]
    assert cs == [2, 2, 2]  # each run within c; the pool bounds them together


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('retires = 2\n[[runs]]\ntasks = "t"', "retires: Extra inputs are not permitted"),
        ('retires = 2\n[[runs]]\ntasks = "t"', "retires: did you mean 'retries'?"),
        ('mode = "both"\n[[runs]]\ntasks = "t"', "mode: Input should be 'sequential'"),
        ("c = 2", "runs: Field required"),
        ('[[runs]]\ntasks = "t"\n[[runs]]\nname = "x"\nrewrads = ["exact"]',
         "runs[1] (x): rewrads: Extra inputs are not permitted"),
        ('[[runs]]\ntasks = "t"\nhareness = "chat"', "hareness: did you mean 'harness'?"),
        ('[[runs]]\ntasks = "t"\nstore = "sqlite:///x.db"', "'store' is the set's"),
        ('retry_codes = ["upstream_status"]\n[[runs]]\ntasks = "t"', "did you mean"),
        ("[[runs", "invalid TOML"),
    ],
)  # fmt: skip
def test_set_file_mistakes_name_the_file_the_run_and_the_key(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "set.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"set\.toml") as caught:
        load_eval_set(path)
    assert says in caught.value.message
    with pytest.raises(ConfigError, match="cannot read eval set"):
        load_eval_set(tmp_path / "nope.toml")


async def test_a_run_that_cannot_start_is_found_before_any_runs(tmp_path: Path) -> None:
    async with Simulator(SimConfig(seed=1)) as sim:
        path = _set_file(tmp_path, sim, 'mode = "parallel"')
        path.write_text(path.read_text() + 'harness = "no_such_module:agent"\n')  # the third's
        with pytest.raises(ConfigError, match=r"runs\[2\] \(c\): harness 'no_such_module:agent'"):
            await rolltap.eval_set(path)
        assert sim.stats.requests == 0
    assert not (tmp_path / "runs.db").exists()
