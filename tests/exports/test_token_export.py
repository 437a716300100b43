"""``rolltap sessions export --format tokens``: token records to training sequences."""

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
from rolltap.exports.tokens import TokenExport, export_tokens
from rolltap.store import Store, StoreNotFoundError, StoreValidationError
from rolltap.store.reader import reading

# Three turns of one conversation: each prompt extends the previous prompt + completion.
P1, C1, L1 = [1, 2, 3], [10, 11], [-0.5, -0.25]
P2, C2, L2 = [*P1, *C1, 4, 5], [12], [-1.0]
P3, C3, L3 = [*P2, *C2, 6], [13, 14, 15], [-0.1, -0.2, -0.3]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def _turn(seq: int, segment: int, p: list[int], c: list[int], lp: Any, reuse: str) -> Any:
    return {"seq": seq, "segment": segment, "prompt_ids": p, "completion_ids": c,
            "completion_logprobs": lp, "prompt_reuse": reuse,
            "policy_versions": spans((0, len(c))), "continued": 0}  # fmt: skip


def spans(*ranges: tuple[int, int], version: str | None = None) -> list[dict[str, Any]]:
    """Spans of one version (records without a version: null)."""
    return [{"version": version, "start": a, "end": b} for a, b in ranges]


async def test_extending_turns_make_one_sequence(store: Store) -> None:
    run = await store.create_run("train")
    log = token_log((P1, C1, L1, "full"), (P2, C2, L2, "extend"), (P3, C3, L3, "extend"))
    info = await add_session(store, run.id, "s1", log)
    (line,), result = await export_lines(store)
    assert result == TokenExport(exported=1)
    sequence = {
        "tokens": [*P3, *C3],
        "loss_mask": [0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1],
        "logprobs": [None] * 3 + L1 + [None] * 2 + L2 + [None] + L3,
        "policy_versions": spans((3, 5), (7, 8), (9, 12)),  # the sampled ids' places
    }
    assert line == {
        "format": "rolltap.tokens",
        "version": 1,
        "session_id": "s1",
        "run_id": run.id,
        "task": {"q": "s1"},
        "reward": 0.5,
        "status": "completed",
        "turns": [
            _turn(2, 0, P1, C1, L1, "full"),
            _turn(4, 0, P2, C2, L2, "extend"),
            _turn(6, 0, P3, C3, L3, "extend"),
        ],
        "segments": [sequence],
        **sequence,
        "metadata": {
            "user": "ana",
            "run_name": "train",
            "created_at": info.created_at,
            "updated_at": info.updated_at,
            "forked_from": None,
            "warnings": [],
        },
    }


async def test_rewritten_history_starts_a_new_segment(store: Store) -> None:
    run = await store.create_run()
    rewritten = [1, 2, 9]  # the harness dropped a message: not a prefix extension
    log = token_log(
        (P1, C1, None, "full"), (P2, C2, L2, "extend"), (rewritten, [20], [-2.0], "full")
    )
    await add_session(store, run.id, "s1", log)
    (line,), _ = await export_lines(store)
    assert line["segments"] == [
        {
            "tokens": [*P2, *C2],
            "loss_mask": [0, 0, 0, 1, 1, 0, 0, 1],
            "logprobs": [None] * 5 + [None, None] + L2,  # the first turn had no logprobs
            "policy_versions": spans((3, 5), (7, 8)),
        },
        {
            "tokens": [1, 2, 9, 20],
            "loss_mask": [0, 0, 0, 1],
            "logprobs": [None] * 3 + [-2.0],
            "policy_versions": spans((3, 4)),
        },
    ]
    assert [t["segment"] for t in line["turns"]] == [0, 0, 1]
    assert [t["prompt_reuse"] for t in line["turns"]] == ["full", "extend", "full"]
    assert (line["tokens"], line["loss_mask"], line["logprobs"]) == (None, None, None)
    assert line["metadata"]["warnings"] == []


async def test_a_false_extend_claim_is_caught(store: Store) -> None:
    run = await store.create_run()
    log = token_log((P1, C1, L1, "full"), ([7, 8], [9], [-1], "extend"))
    await add_session(store, run.id, "s1", log)
    (line,), _ = await export_lines(store)
    assert [s["tokens"] for s in line["segments"]] == [[*P1, *C1], [7, 8, 9]]
    assert line["turns"][1]["prompt_reuse"] == "extend"
    (warning,) = line["metadata"]["warnings"]
    assert "turn 1 (event 4) is marked extend" in warning


async def test_sessions_without_or_with_bad_records_are_skipped(store: Store) -> None:
    run = await store.create_run()
    await add_session(store, run.id, "a-tokens", token_log((P1, C1, L1, "full")))
    plain = EventLog()
    plain.append("model_response", {"status": 200, "message": {"content": "hi"}})
    await add_session(store, run.id, "b-plain", plain)
    await add_session(store, run.id, "c-bad", token_log((P1, C1, [-1.0], "full")))
    await add_session(store, run.id, "d-bad", token_log((P1, C1, L1, "rewrite")))
    fork = await store.create_session(run.id, session_id="e-fork", parent="a-tokens", fork_at=3)
    lines, result = await export_lines(store, run=run.id)
    assert [line["session_id"] for line in lines] == ["a-tokens", "e-fork"]
    assert lines[1]["metadata"]["forked_from"] == {"session": "a-tokens", "at": 3}
    assert lines[1]["tokens"] == lines[0]["tokens"]  # the fork inherits the prefix
    assert fork.parent_id == "a-tokens"
    assert result.without_tokens == ["b-plain"]
    assert result.malformed == {
        "c-bad": "event 2: completion_logprobs must hold one number (or null) per id",
        "d-bad": "event 2: render must be one of extend, full, server, not 'rewrite'",
    }


async def test_none_qualifying_is_an_error_naming_them(store: Store, tmp_path: Path) -> None:
    run = await store.create_run()
    for n in range(12):
        await add_session(store, run.id, f"s{n:02}", EventLog())
    dest = tmp_path / "out.jsonl"
    async with reading(store.engine) as conn:
        # sessions without a single model call are named as such
        match = r"s00 \(no_model_calls\), s01 \(no_model_calls\),.* s09 \(no_model_calls\) and 2"
        with pytest.raises(StoreValidationError, match=match):
            await export_tokens(conn, dest, run=None, session=None)
        wheres: list[dict[str, Any]] = [{"run": "nope", "session": None},
                                        {"run": None, "session": "nope"}]  # fmt: skip
        for where in wheres:
            with pytest.raises(StoreNotFoundError):
                await export_tokens(conn, dest, **where)
    assert not dest.exists()


def test_cli_export_tokens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def populate() -> None:
        async with await Store.open(url) as store:
            run = await store.create_run("cli")
            await add_session(store, run.id, "s1", token_log((P1, C1, L1, "full")))
            await add_session(store, run.id, "s2", EventLog())

    asyncio.run(populate())
    app, runner = register_commands(), CliRunner()
    out = tmp_path / "tokens.jsonl"
    args = ["sessions", "export", "--format", "tokens", "--store", url]
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "exported 1 rollout(s)" in result.stderr
    # s2 made no model call: left out, and said so
    assert "skipped (--include-empty writes them): 1 session(s) that made no model call" in (
        result.stderr
    )
    (line,) = [orjson.loads(raw) for raw in out.read_bytes().splitlines()]
    assert (line["session_id"], line["tokens"]) == ("s1", [*P1, *C1])
    to_stdout = runner.invoke(app, [*args, "-o", "-", "--session", "s1"])
    assert orjson.loads(to_stdout.stdout) == line
    missing = runner.invoke(app, [*args, "-o", str(tmp_path / "none.jsonl"), "--session", "s2"])
    assert missing.exit_code == 1
    assert "no session has token records to export: s2" in missing.output
    assert not (tmp_path / "none.jsonl").exists()
