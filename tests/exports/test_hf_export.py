"""``rolltap sessions export --format hf``: a dataset ``datasets.load_from_disk`` opens,
one typed row per rollout, from real runs against the simulator."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

datasets = pytest.importorskip("datasets")

from gateway.simtok import build_sim_tokenizer  # noqa: E402
from rolltap.cli.main import register_commands  # noqa: E402
from rolltap.config import EndpointConfig  # noqa: E402
from rolltap.errors import MissingExtraError  # noqa: E402
from rolltap.events import EventLog  # noqa: E402
from rolltap.exports.hf import HfExport, export_hf, features  # noqa: E402
from rolltap.rollouts import HarnessContext, HarnessResult, RolloutResult, Task  # noqa: E402
from rolltap.rollouts.builtin import chat_harness  # noqa: E402
from rolltap.sim import Simulator  # noqa: E402
from rolltap.store import Store  # noqa: E402
from rolltap.store.reader import reading  # noqa: E402
from runkit import evaluate  # noqa: E402

TASK = Task(id="calc", prompt="what is 6*7?", info={"regex": "."})
TOKEN_COLUMNS = ("prompt_ids", "completion_ids", "logprobs", "loss_mask", "segments")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # loading must never reach the Hub: the dataset is a local directory
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


async def _run(url: str, harness: Any, endpoint: EndpointConfig, name: str) -> RolloutResult:
    result = await evaluate([TASK], harness=harness, endpoint=endpoint, store=url,
                            rewards=["regex"], name=name)  # fmt: skip
    (res,) = result.results
    assert res.status == "completed", res.error
    return res


async def _export(url: str, dest: Path, **options: Any) -> HfExport:
    async with await Store.open(url) as store, reading(store.engine) as conn:
        return await export_hf(conn, dest, run=options.pop("run", None), session=None, **options)


def _by_run(dataset: Any) -> dict[str, dict[str, Any]]:
    return {row["run_name"]: row for row in dataset}


async def _events(url: str, session_id: str) -> list[Any]:
    async with await Store.open(url) as store:
        return list(await store.events(session_id))


async def test_runs_with_tool_calls_and_token_records_round_trip(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    plain = EndpointConfig(base_url=sim.base_url, model="sim-model")
    tokens = EndpointConfig(base_url=sim.base_url, model="sim-model", client="tokens",
                            tokenizer=str(build_sim_tokenizer(tmp_path / "tok")))  # fmt: skip
    anthropic = EndpointConfig(base_url=sim.base_url, model="sim-model", dialect="chat")
    results = {
        "tools": await _run(url, "tool-agent", plain, "tools"),
        "tokens": await _run(url, "tool-agent", tokens, "tokens"),
        "anthropic": await _run(url, "messages-tool-agent", anthropic, "anthropic"),
    }
    done = await _export(url, tmp_path / "out")
    assert (done.exported, done.with_tokens, done.shards) == (3, 1, 1)
    dataset = datasets.load_from_disk(str(tmp_path / "out"))
    assert dataset.features == features()  # every column's type as declared
    rows = _by_run(dataset)
    assert set(rows) == set(results)
    for name, row in rows.items():
        res = results[name]
        assert (row["session_id"], row["task_id"], row["sample"]) == (res.session_id, "calc", 0)
        assert (row["status"], row["reward"], row["answer"]) == ("completed", 1.0, res.answer)
        assert row["reward_components"] == [{"name": "regex", "value": 1.0}]
        assert row["usage"]["prompt_tokens"] == res.calls.prompt_tokens > 0
        assert row["usage"]["completion_tokens"] == res.calls.completion_tokens > 0
        assert len(row["calls"]) == 2 and row["error_code"] is None
        assert json.loads(row["task"])["task"]["prompt"] == TASK.prompt
        _check_tool_conversation(row["messages"], res.answer or "")
    assert all(rows[name][col] is None for name in ("tools", "anthropic") for col in TOKEN_COLUMNS)
    assert rows["anthropic"]["calls"][0]["dialect"] == "messages"
    await _check_tokens(rows["tokens"], await _events(url, results["tokens"].session_id or ""))


def _check_tool_conversation(messages: list[dict[str, Any]], answer: str) -> None:
    """user → assistant tool call → tool result answering it → assistant answer, chat shape."""
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    user, asked, result, final = messages
    assert user["content"] == TASK.prompt
    (call,) = asked["tool_calls"]
    assert (call["type"], call["function"]["name"]) == ("function", "calculator")
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
    assert (result["tool_call_id"], result["name"]) == (call["id"], "calculator")
    assert "unsupported expression" in result["content"]
    assert (final["content"], final["tool_calls"], user["tool_calls"]) == (answer, None, None)


async def _check_tokens(row: dict[str, Any], events: list[Any]) -> None:
    records = [e.payload["tokens"] for e in events if e.kind == "model_response"]
    assert len(records) == 2 and records[1]["render"] == "extend"
    first, last = records
    assert row["prompt_ids"] == first["prompt_ids"]
    assert row["prompt_ids"] + row["completion_ids"] == last["prompt_ids"] + last["completion_ids"]
    mask, logprobs = row["loss_mask"], row["logprobs"]
    assert len(mask) == len(logprobs) == len(row["completion_ids"])
    sampled = first["completion_ids"] + last["completion_ids"]
    assert [t for t, m in zip(row["completion_ids"], mask, strict=True) if m] == sampled
    assert 0 in mask  # the tool result between the turns is not trained on
    recorded = first["completion_logprobs"] + last["completion_logprobs"]
    assert [lp for lp, m in zip(logprobs, mask, strict=True) if m] == recorded
    assert all(lp is None for lp, m in zip(logprobs, mask, strict=True) if not m)
    (segment,) = row["segments"]
    assert segment == {k: row[k] for k in (*TOKEN_COLUMNS[:4], "policy_versions")}
    # one span per turn's completion (no version set), placed in completion_ids
    n, gap = len(first["completion_ids"]), len(last["prompt_ids"]) - len(first["prompt_ids"])
    assert row["policy_versions"] == [
        {"version": None, "start": 0, "end": n},
        {"version": None, "start": gap, "end": gap + len(last["completion_ids"])},
    ]
    assert row["continued"] == 0


async def boxed(task: Task, ctx: HarnessContext) -> HarnessResult:
    """A harness whose answer is not its last reply's text."""
    reply = await chat_harness(task, ctx)
    return HarnessResult(f"ANSWER: {reply.answer}")


async def test_the_answer_is_the_harness_answer_not_the_last_reply(
    sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    res = await _run(url, boxed, endpoint, "boxed")
    await _export(url, tmp_path / "out")
    (row,) = datasets.load_from_disk(str(tmp_path / "out"))
    assert row["answer"] == res.answer
    assert row["answer"].startswith("ANSWER: ")
    assert row["messages"][-1]["content"] == row["answer"].removeprefix("ANSWER: ")


def _session_log(n: int) -> EventLog:
    log = EventLog()
    log.append("model_request", {"intercept_id": "i", "dialect": "chat", "params": {},
                                 "messages": [{"role": "user", "content": f"q{n}"}]})  # fmt: skip
    response: dict[str, Any] = {"intercept_id": "i", "status": 200,
                                "message": {"role": "assistant", "content": f"a{n}"}}  # fmt: skip
    if n % 2:  # every other rollout has token records: shards of nulls and of lists mix
        response["tokens"] = {"prompt_ids": [1, n], "completion_ids": [n + 2],
                              "completion_logprobs": [-0.5], "render": "full"}  # fmt: skip
    log.append("model_response", response)
    return log


async def _populate(url: str, count: int) -> tuple[str, list[str]]:
    async with await Store.open(url) as store:
        run = await store.create_run("many")
        ids = []
        for n in range(count):
            info = await store.create_session(run.id, task={"task_id": str(n), "sample": 0})
            await store.commit(info.id, _session_log(n), status="completed", reward=n / count)
            ids.append(info.id)
        return run.id, ids


async def test_many_sessions_are_written_in_several_shards(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/many.db"
    run_id, ids = await _populate(url, 30)
    done = await _export(url, tmp_path / "out", run=run_id, batch_rows=4, max_shard_bytes=1)
    assert (done.exported, done.with_tokens, done.shards) == (30, 15, 8)  # ⌈30 / 4⌉
    shards = sorted((tmp_path / "out").glob("data-*-of-00008.arrow"))
    assert len(shards) == 8
    schema = features().arrow_schema
    for shard in shards:  # the same declared types in every shard, whatever it holds
        with pa.memory_map(str(shard)) as source:
            assert pa.ipc.open_stream(source).schema.equals(schema)
    dataset = datasets.load_from_disk(str(tmp_path / "out"))
    assert sorted(dataset["session_id"]) == sorted(ids)
    for row in dataset:
        n = int(row["task_id"])
        assert row["answer"] == f"a{n}" and row["messages"][0]["content"] == f"q{n}"
        assert row["completion_ids"] == ([n + 2] if n % 2 else None)


def test_cli_writes_a_dataset_in_a_subprocess(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    run_id, ids = asyncio.run(_populate(url, 3))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = [sys.executable, "-m", "rolltap", "sessions", "export", "--format", "hf",
               "--store", url, "--run", run_id[:8]]  # fmt: skip
    done = subprocess.run([*command, "-o", str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "exported 3 rollout(s) (1 with token records) in 1 shard(s)" in done.stderr
    dataset = datasets.load_from_disk(str(tmp_path / "out"))
    assert sorted(dataset["session_id"]) == sorted(ids)
    again = subprocess.run([*command, "-o", str(tmp_path / "out")], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 1 and "exists and is not an empty directory" in again.stderr
    assert len(datasets.load_from_disk(str(tmp_path / "out"))) == 3  # left as it was
    to_stdout = subprocess.run([*command, "-o", "-"], env=env, capture_output=True,
                               text=True, timeout=120)  # fmt: skip
    assert to_stdout.returncode == 2 and "give -o DIR" in to_stdout.stderr


def test_without_the_extra_it_is_a_one_line_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    asyncio.run(_populate(url, 1))
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=r"rolltap\[hf\]"):
        asyncio.run(_export(url, tmp_path / "lib"))
    args = ["sessions", "export", "--format", "hf", "--store", url, "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(register_commands(), args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error [missing_extra] datasets is not installed; install the 'hf' extra: "
        "pip install 'rolltap[hf]'"
    ]
    assert not (tmp_path / "out").exists() and not (tmp_path / "lib").exists()


def _tokens_log(*records: dict[str, Any]) -> EventLog:
    log = EventLog()
    for n, tokens in enumerate(records):
        asked = [{"role": "user", "content": f"q{n}"}]
        log.append(
            "model_request",
            {"intercept_id": f"i{n}", "dialect": "chat", "params": {}, "messages": asked},
        )
        answer = {"role": "assistant", "content": f"a{n}"}
        log.append(
            "model_response",
            {"intercept_id": f"i{n}", "status": 200, "tokens": tokens, "message": answer},
        )
    return log


async def test_rewritten_history_and_malformed_records(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/segments.db"
    first = {"prompt_ids": [1, 2], "completion_ids": [3], "completion_logprobs": [-1.0],
             "render": "full"}  # fmt: skip
    rewritten = {"prompt_ids": [1, 9], "completion_ids": [4, 5], "render": "full"}
    async with await Store.open(url) as store:
        run = await store.create_run("segments")
        for sid, log in (
            ("s1", _tokens_log(first, rewritten)),
            ("s2", _tokens_log(first, {**rewritten, "completion_ids": [-4]})),
        ):
            await store.create_session(run.id, session_id=sid, task={})
            await store.commit(sid, log, status="completed")  # fmt: skip
    done = await _export(url, tmp_path / "out")
    assert (done.exported, done.with_tokens, done.warned) == (2, 1, 1)
    assert done.warnings == ["s2: token records not exported: event 3: "
                             "completion_ids must be a list of non-negative integers"]  # fmt: skip
    two, bad = datasets.load_from_disk(str(tmp_path / "out"))
    assert [two[col] for col in TOKEN_COLUMNS[:4]] == [None] * 4  # several sequences
    assert two["segments"] == [
        {"prompt_ids": [1, 2], "completion_ids": [3], "logprobs": [-1.0], "loss_mask": [1],
         "policy_versions": [{"version": None, "start": 0, "end": 1}]},
        {"prompt_ids": [1, 9], "completion_ids": [4, 5], "logprobs": [None, None],
         "loss_mask": [1, 1], "policy_versions": [{"version": None, "start": 0, "end": 2}]},
    ]  # fmt: skip
    assert [bad[col] for col in TOKEN_COLUMNS] == [None] * 5
    assert bad["metadata"]["warnings"] == [done.warnings[0].removeprefix("s2: ")]
    assert [m["content"] for m in bad["messages"]] == ["q0", "a0", "q1", "a1"]


def test_on_drift_drop_leaves_drifted_rollouts_out_even_all_of_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/drift.db"
    first = {"prompt_ids": [1, 2], "completion_ids": [3], "render": "full"}
    rewritten = {"prompt_ids": [1, 9], "completion_ids": [4, 5], "render": "full"}
    extends = {"prompt_ids": [1, 2, 3, 7], "completion_ids": [8], "render": "extend"}

    async def populate() -> dict[str, str]:
        async with await Store.open(url) as store:
            runs = {name: (await store.create_run(name)).id for name in ("rewrote", "mixed")}
            for run, sid, log in (
                ("rewrote", "d1", _tokens_log(first, rewritten)),
                ("rewrote", "d2", _tokens_log(first, rewritten)),
                ("mixed", "d3", _tokens_log(first, rewritten)),
                ("mixed", "c1", _tokens_log(first, extends)),
            ):
                await store.create_session(runs[run], session_id=sid, task={})
                await store.commit(sid, log, status="completed")
            return runs

    runs = asyncio.run(populate())
    mixed = asyncio.run(_export(url, tmp_path / "mixed", run=runs["mixed"], on_drift="drop"))
    assert (mixed.exported, mixed.dropped) == (1, ["d3"])
    assert datasets.load_from_disk(str(tmp_path / "mixed"))["session_id"] == ["c1"]
    app, out = register_commands(), tmp_path / "none"
    args = ["sessions", "export", "--format", "hf", "--store", url, "--run", runs["rewrote"]]
    # every rollout of the run drifted: an empty dataset, the drop said, exit 0
    result = CliRunner().invoke(app, [*args, "-o", str(out), "--on-drift", "drop"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "exported 0 rollout(s) (0 with token records) in 1 shard(s)",
        "2 rollout(s) with token drift (left out; --on-drift drop)",
    ]
    empty = datasets.load_from_disk(str(out))
    assert len(empty) == 0 and empty.features == features()
    keep = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "k"), "--on-drift", "keep"])
    assert keep.exit_code == 2 and "--on-drift keep is for --format tokens" in keep.stderr
    assert not (tmp_path / "k").exists()
