"""``rolltap sessions export --format tokens --on-drift split|keep|drop``: what a drifted
turn (its prompt not the previous prompt + completion) makes of a rollout's line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from exports.exportkit import add_session, export_lines, token_log
from rolltap.cli.main import register_commands
from rolltap.events import EventLog
from rolltap.exports.tokens import export_tokens
from rolltap.store import Store, StoreValidationError
from rolltap.store.reader import reading

P1, C1, L1 = [1, 2, 3], [10, 11], [-0.5, -0.25]
P2, C2, L2 = [*P1, *C1, 4, 5], [12], [-1.0]
# turn 3 re-rendered the history: id 11 (sampled in turn 1) came back as 99
P3, C3, L3 = [1, 2, 3, 10, 99, 4, 5, 12, 6], [13, 14], [-0.1, -0.2]
DRIFT = {"at": 4, "expected": [1, 2, 3, 10, 11, 4, 5, 12], "got": [1, 2, 3, 10, 99, 4, 5, 12],
         "reason": "retokenized"}  # fmt: skip
DRIFTED = ((P1, C1, L1, "full"), (P2, C2, L2, "extend"), (P3, C3, L3, "full", {"drift": DRIFT}))
CLEAN = ((P1, C1, L1, "full"), (P2, C2, L2, "extend"))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        run = await opened.create_run("train")
        await add_session(opened, run.id, "a-drift", token_log(*DRIFTED))
        await add_session(opened, run.id, "b-clean", token_log(*CLEAN))
        yield opened


async def test_split_is_format_v1_unchanged(store: Store) -> None:
    lines, result = await export_lines(store)
    assert [line["session_id"] for line in lines] == ["a-drift", "b-clean"]
    assert (result.exported, result.drifted) == (2, ["a-drift"])
    line = lines[0]
    assert line["segments"] == [
        {"tokens": [*P2, *C2], "loss_mask": [0, 0, 0, 1, 1, 0, 0, 1],
         "logprobs": [None] * 3 + L1 + [None] * 2 + L2,
         "policy_versions": [{"version": None, "start": 3, "end": 5},
                             {"version": None, "start": 7, "end": 8}]},
        {"tokens": [*P3, *C3], "loss_mask": [0] * 9 + [1, 1], "logprobs": [None] * 9 + L3,
         "policy_versions": [{"version": None, "start": 9, "end": 11}]},
    ]  # fmt: skip
    assert line["tokens"] is None and [t["segment"] for t in line["turns"]] == [0, 0, 1]
    # exactly the line the same records make without a drift record: no key added
    run = await store.create_run("plain")
    await add_session(store, run.id, "c-plain", token_log(*DRIFTED[:2], (P3, C3, L3, "full")))
    (old,), _ = await export_lines(store, session="c-plain")
    strip = ("session_id", "run_id", "task", "metadata")
    assert {k: v for k, v in line.items() if k not in strip} == {
        k: v for k, v in old.items() if k not in strip
    }
    assert line["metadata"].keys() == old["metadata"].keys()


async def test_keep_makes_one_sequence_as_last_sent_with_the_drift_marked(store: Store) -> None:
    lines, result = await export_lines(store, on_drift="keep")
    assert (result.exported, result.drifted) == (2, ["a-drift"])
    line, clean = lines
    # the last prompt as sent + its completion; turn 1's id 10 is still the model's sample
    # at its place, its 11 and turn 2's 12 are now prompt: the cut at 4 dropped them
    sequence = {
        "tokens": [*P3, *C3],
        "loss_mask": [0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1],
        "logprobs": [None, None, None, L1[0], None, None, None, None, None, *L3],
        # the versions of the ids still sampled at their places
        "policy_versions": [{"version": None, "start": 3, "end": 4},
                            {"version": None, "start": 9, "end": 11}],
    }  # fmt: skip
    assert line["segments"] == [sequence]
    assert {k: line[k] for k in sequence} == sequence
    assert [t["segment"] for t in line["turns"]] == [0, 0, 0]
    assert [t.get("drift") for t in line["turns"]] == [None, None, DRIFT]
    assert line["metadata"]["drift"] == [{"turn": 2, "seq": 6, "at": 4, "reason": "retokenized"}]
    assert line["metadata"]["on_drift"] == "keep" and line["metadata"]["warnings"] == []
    # a rollout without drift is the one sequence split would give too
    assert clean["tokens"] == [*P2, *C2] and clean["metadata"]["drift"] == []


async def test_keep_marks_a_drift_only_the_ids_show(tmp_path: Path) -> None:
    async with await Store.open(f"sqlite:///{tmp_path / 'old.db'}") as store:
        run = await store.create_run()
        # records from before drift was recorded: a full render shorter than the history,
        # and a false extend claim
        await add_session(store, run.id, "s", token_log(
            (P1, C1, L1, "full"), ([1, 2], [7], [-3.0], "full"), ([1, 2, 7, 8], [9], None, "full"),
            ([5], [6], None, "extend"),
        ))  # fmt: skip
        (line,), result = await export_lines(store, on_drift="keep")
    assert result.drifted == ["s"]
    assert line["tokens"] == [5, 6] and line["loss_mask"] == [0, 1]
    assert line["metadata"]["drift"] == [
        {"turn": 1, "seq": 4, "at": 2, "reason": None},
        {"turn": 3, "seq": 8, "at": 0, "reason": None},
    ]
    assert line["turns"][1]["drift"] == {
        "at": 2,
        "expected": [1, 2, 3, 10, 11],
        "got": [1, 2],
        "reason": None,
    }
    (warning,) = line["metadata"]["warnings"]
    assert warning.startswith("turn 3 (event 8) is marked extend")


async def test_drop_leaves_the_rollout_out_and_counts_it(store: Store, tmp_path: Path) -> None:
    lines, result = await export_lines(store, on_drift="drop")
    assert [line["session_id"] for line in lines] == ["b-clean"]
    assert lines[0]["tokens"] == [*P2, *C2] and "drift" not in lines[0]["metadata"]
    assert (result.exported, result.drifted) == (1, ["a-drift"])
    dest = tmp_path / "none.jsonl"
    async with reading(store.engine) as conn:
        with pytest.raises(StoreValidationError, match="on_drift must be one of"):
            await export_tokens(conn, dest, run=None, session=None, on_drift="fix")  # type: ignore[arg-type]
        assert not dest.exists()
        # dropping every rollout is what was asked: an empty file, the drop counted
        result = await export_tokens(conn, dest, run=None, session="a-drift", on_drift="drop")
    assert (result.exported, result.drifted) == (0, ["a-drift"])
    assert dest.read_bytes() == b""


async def test_a_drop_that_leaves_nothing_beside_sessions_without_tokens_is_no_error(
    store: Store, tmp_path: Path
) -> None:
    # a session with no model call left out too: the drop, the user's choice, emptied it
    run = await store.create_run("mixed")
    await add_session(store, run.id, "c-drift", token_log(*DRIFTED))
    await add_session(store, run.id, "d-idle", EventLog())
    dest = tmp_path / "mixed.jsonl"
    async with reading(store.engine) as conn:
        result = await export_tokens(conn, dest, run=run.id, session=None, on_drift="drop")
        assert (result.exported, result.drifted) == (0, ["c-drift"])
        assert result.no_model_calls == ["d-idle"] and dest.read_bytes() == b""
        # without the drop the same export has a line: only the data can empty it then
        idle = tmp_path / "idle.jsonl"
        with pytest.raises(StoreValidationError, match=r"d-idle \(no_model_calls\)"):
            await export_tokens(conn, idle, run=None, session="d-idle", on_drift="drop")
    assert not idle.exists()


def test_cli_drop_of_every_rollout_writes_an_empty_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def populate() -> None:
        async with await Store.open(url) as store:
            run = await store.create_run("rewrote")
            for sid in ("a-drift", "b-drift"):  # both rewrote their history
                await add_session(store, run.id, sid, token_log(*DRIFTED))

    asyncio.run(populate())
    out = tmp_path / "tokens.jsonl"
    result = CliRunner().invoke(register_commands(), [
        "sessions", "export", "--format", "tokens", "--store", url, "-o", str(out),
        "--on-drift", "drop",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == b""
    assert "exported 0 rollout(s)" in result.stderr
    assert "2 rollout(s) with token drift (left out; --on-drift drop)" in result.stderr
    assert "error" not in result.stderr


def test_cli_on_drift(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def populate() -> None:
        async with await Store.open(url) as store:
            run = await store.create_run("cli")
            await add_session(store, run.id, "a-drift", token_log(*DRIFTED))
            await add_session(store, run.id, "b-clean", token_log(*CLEAN))

    asyncio.run(populate())
    app, runner = register_commands(), CliRunner()
    said: dict[str, Any] = {}
    for choice in ("split", "keep", "drop", None):
        out = tmp_path / f"{choice}.jsonl"
        extra = [] if choice is None else ["--on-drift", choice]
        result = runner.invoke(
            app, ["sessions", "export", "--format", "tokens", "--store", url, "-o", str(out),
                  *extra],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        lines = [orjson.loads(raw) for raw in out.read_bytes().splitlines()]
        said[str(choice)] = (result.stderr, [(x["session_id"], x["tokens"]) for x in lines])
    assert said["None"] == said["split"]  # the default
    assert "exported 2 rollout(s)" in said["split"][0]
    assert "1 rollout(s) with token drift (split into segments" in said["split"][0]
    assert said["keep"][1] == [("a-drift", [*P3, *C3]), ("b-clean", [*P2, *C2])]
    assert "1 rollout(s) with token drift (kept as one sequence" in said["keep"][0]
    assert said["drop"][1] == [("b-clean", [*P2, *C2])]
    assert "exported 1 rollout(s)" in said["drop"][0]
    assert "1 rollout(s) with token drift (left out; --on-drift drop)" in said["drop"][0]
    bad = runner.invoke(app, ["sessions", "export", "--format", "tokens", "--store", url,
                              "-o", "-", "--on-drift", "mend"])  # fmt: skip
    assert bad.exit_code == 2 and "mend" in bad.output
