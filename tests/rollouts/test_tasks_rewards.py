"""Task files (errors name file and line), rewards, pass@k, the calculator."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rolltap.errors import ConfigError
from rolltap.rollouts import Scorer, Task, load_tasks, parse_reward_spec
from rolltap.rollouts.calculator import calculate
from rolltap.rollouts.config import load_run_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"prompt": "a"}\n{"prompt": \n', ":2: invalid JSON"),
        ('{"prompt": "a"}\n\n{"answer": "x"}\n', ":3: a task needs 'prompt' or 'messages'"),
        ("[1, 2]\n", ":1: a task must be a JSON object"),
        ('{"prompt": "a", "id": 1}\n{"prompt": "b", "id": 1}\n', ":2: duplicate task id"),
        ('{"prompt": 5}\n', ":1: 'prompt' must be a string"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_tasks(path)
    assert str(path) + fragment in str(info.value)


def test_ids_default_to_line_numbers_and_n_shuffle(tmp_path: Path) -> None:
    path = _write(tmp_path, "".join(f'{{"prompt": "p{i}"}}\n' for i in range(10)))
    assert [t.id for t in load_tasks(path, n=3)] == ["1", "2", "3"]
    shuffled = [t.id for t in load_tasks(path, shuffle=True, seed=1)]
    assert sorted(shuffled, key=int) == [str(i) for i in range(1, 11)]
    assert shuffled != sorted(shuffled, key=int)
    assert shuffled == [t.id for t in load_tasks(path, shuffle=True, seed=1)]


def test_parquet_tasks_load_with_messages_answers_and_info(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="Parquet tasks need the parquet extra")
    import pyarrow.parquet as pq

    path = tmp_path / "tasks.parquet"
    columns = {
        "id": ["a", "b"],
        "prompt": ["1, 2,", None],
        "messages": [None, [{"role": "user", "content": "hi"}]],
        "answer": ["3", None],
        "info": [{"k": "v"}, None],
    }
    pq.write_table(pa.table(columns), path)
    first, second = load_tasks(path)
    assert (first.id, first.prompt, first.answer, first.info) == ("a", "1, 2,", "3", {"k": "v"})
    assert (second.id, second.chat_messages()) == ("b", [{"role": "user", "content": "hi"}])
    (path.parent / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(ConfigError, match="cannot read Parquet"):
        load_tasks(path.parent / "bad.parquet")


def test_parquet_without_pyarrow_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a None entry in sys.modules makes the import fail as if pyarrow were absent
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ConfigError, match="pip install pyarrow"):
        load_tasks(tmp_path / "t.parquet")


async def test_weighted_rewards() -> None:
    task = Task(id="1", prompt="1, 2,", answer="3", info={})
    scorer = Scorer([parse_reward_spec("prefix=3"), parse_reward_spec("exact")])
    reward, parts = await scorer.score(task, " 3, 4, 5", [])
    assert parts == {"prefix": 1.0, "exact": 0.0}
    assert reward == pytest.approx(0.75)
    numeric = Scorer(
        [parse_reward_spec("numeric"), parse_reward_spec("rollout_harnesses:async_reward")]
    )
    reward, parts = await numeric.score(
        Task(id="2", prompt="", answer="1,234.5"), "it is 1234.5 ok", []
    )
    assert parts == {"numeric": 1.0, "rollout_harnesses:async_reward": 0.5}
    with pytest.raises(ConfigError, match="weight"):
        parse_reward_spec("exact=-1")
    with pytest.raises(ConfigError, match="unknown reward"):
        Scorer([parse_reward_spec("nope")])


def test_calculator_is_safe() -> None:
    assert calculate("(1 + 2) * 3 - 4 / 2") == 7.0
    for bad in ("__import__('os').system('true')", "a + 1", "2 ** 1000", "[1] * 3", "True + 1"):
        with pytest.raises(ValueError):
            calculate(bad)


def test_run_config_tasks_path_relative_to_file(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text(
        'tasks = "t.jsonl"\nharness = "chat"\n[sampling]\ntemperature = 0\n'
    )
    config = load_run_config(tmp_path / "run.toml")
    assert config.tasks == str(tmp_path / "t.jsonl")
    (tmp_path / "bad.toml").write_text("c = -1\n")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        load_run_config(tmp_path / "bad.toml")
