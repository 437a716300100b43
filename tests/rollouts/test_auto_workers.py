"""``workers = "auto"`` (the default): worker processes when ``c`` needs them and the
machine has the cores; explicit ``0``/``N`` and Ray as said."""

from __future__ import annotations

from pathlib import Path

import pytest

import rolltap
from rolltap.errors import ConfigError
from rolltap.evaluation import backend_for
from rolltap.rollouts import RunConfig
from rolltap.rollouts.auto_workers import AUTO_C_PER_WORKER, AUTO_MIN_C, auto_workers
from rolltap.rollouts.config import load_run_config


@pytest.mark.parametrize(
    ("c", "cores", "expected"),
    [
        (AUTO_MIN_C - 1, 64, 0),  # small enough for one process
        (AUTO_MIN_C, 1, 0),  # one core: nothing to spread over
        (AUTO_MIN_C, 2, 2),
        (2048, 2, 2),  # at most one a core
        (2048, 64, 2048 // AUTO_C_PER_WORKER),
        (100_000, 8, 8),
    ],
)
def test_the_rule(c: int, cores: int, expected: int) -> None:
    assert auto_workers(c, cores=cores) == expected


def test_auto_and_unset_decide_by_c_zero_and_n_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("rolltap.rollouts.auto_workers.available_cores", lambda: 4)
    assert backend_for(RunConfig(c=8)) == rolltap.InProcess()
    assert backend_for(RunConfig(c=AUTO_MIN_C)) == rolltap.Workers(2)
    assert backend_for(RunConfig(c=4096, workers="auto")) == rolltap.Workers(4)
    assert backend_for(RunConfig(c=4096, workers=0)) == rolltap.InProcess()
    assert backend_for(RunConfig(c=8, workers=3)) == rolltap.Workers(3)
    # a harness function cannot travel: auto keeps it here
    assert backend_for(RunConfig(c=4096), in_process_harness=True) == rolltap.InProcess()
    # Ray: auto leaves the count to the cluster (one worker a node)
    assert backend_for(RunConfig(c=4096, ray="auto")) == rolltap.Ray("auto")


def test_in_process_is_stored_as_workers_0() -> None:
    placed = RunConfig(c=4096).placed(rolltap.InProcess().placement())
    assert placed.workers == 0 and not placed.distributed
    assert backend_for(placed) == rolltap.InProcess()  # a resume stays here


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"workers": -1}, "workers"),
        ({"workers": "many"}, "workers"),
        ({"workers": 0, "ray": "local"}, "workers = 0 runs in this process: not with ray"),
    ],
)
def test_bad_values_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig.model_validate(fields)


def test_the_run_config_file_takes_auto(tmp_path: Path) -> None:
    file = tmp_path / "run.toml"
    file.write_text('workers = "auto"\nc = 2048\n')
    assert load_run_config(file).workers == "auto"
    file.write_text('workers = "al"\n')
    with pytest.raises(ConfigError, match="workers"):
        load_run_config(file)
