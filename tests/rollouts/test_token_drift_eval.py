"""``rolltap eval --client tokens`` with a harness that rewrites its history: the drifted
turn is counted in the run summary (``token_drift``), and the training export splits,
keeps or drops the rollout as ``--on-drift`` says; the viewer's token view marks it."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import orjson

from clikit import arolltap_parts
from gateway.simtok import build_sim_tokenizer
from rolltap.sim import Simulator
from rolltap.store import Store
from rolltap.view.rollout import token_view

AGENT = Path(__file__).with_name("rewrite_agent.py")


async def _export(url: str, dest: Path, on_drift: str) -> tuple[str, dict[str, Any]]:
    code, _, err = await arolltap_parts(
        "sessions", "export", "--store", url, "--format", "tokens", "-o", str(dest),
        "--on-drift", on_drift,
    )  # fmt: skip
    assert code == 0, err
    raw = await asyncio.to_thread(dest.read_bytes)
    lines = map(orjson.loads, raw.splitlines())
    return err, {line["task"]["task_id"]: line for line in lines}


async def test_a_rewriting_harness_is_counted_and_exported_by_on_drift(
    sim: Simulator, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b"\n".join(orjson.dumps({
        "id": name, "prompt": "add one and one", "info": {"regex": r"\w+", "rewrite": rewrite}
    }) for name, rewrite in (("edits", True), ("keeps", False))))  # fmt: skip
    url = f"sqlite:///{tmp_path}/runs.db"
    code, out, err = await arolltap_parts(
        "eval", str(tasks), "--cmd", f"{shlex.quote(sys.executable)} {AGENT}",
        "--endpoint", sim.base_url, "--model", "sim-model", "--reward", "regex",
        "--store", url, "--json", "--client", "tokens",
        "--tokenizer", str(build_sim_tokenizer(tmp_path / "tok")),
    )  # fmt: skip
    assert code == 0, err
    summary = orjson.loads(out)
    assert summary["model_calls"] == 6
    assert summary["token_drift"] == {"turns": 1, "rollouts": 1}
    async with await Store.open(url) as store:
        sessions = {s.task["task_id"]: s for s in await store.list_sessions()}
        history = await store.events(sessions["edits"].id)
    turns = [e.payload["tokens"] for e in history if e.kind == "model_response"]
    assert ["drift" in t for t in turns] == [False, False, True]
    assert turns[2]["drift"]["reason"] == "history_rewritten"
    last = turns[2]["prompt_ids"] + turns[2]["completion_ids"]
    # the viewer's token view marks the turn from its record: where, and why
    view = token_view(history)
    assert [t["drift"] for t in view.turns] == [False, False, True]
    at = turns[2]["drift"]["at"]
    assert view.drift == [f"turn 2 (event {view.turns[2]['seq']}) drifted at id {at} "
                          f"(history_rewritten): expected {turns[2]['drift']['expected']}, "
                          f"got {turns[2]['drift']['got']}"]  # fmt: skip

    said, split = await _export(url, tmp_path / "split.jsonl", "split")
    assert "1 rollout(s) with token drift" in said
    assert [len(split[t]["segments"]) for t in ("edits", "keeps")] == [2, 1]
    assert split["edits"]["segments"][1]["tokens"] == last
    _, kept = await _export(url, tmp_path / "keep.jsonl", "keep")
    assert kept["edits"]["tokens"] == last
    (mark,) = kept["edits"]["metadata"]["drift"]
    assert (mark["turn"], mark["at"], mark["reason"]) == (2, turns[2]["drift"]["at"],
                                                          "history_rewritten")  # fmt: skip
    mask = kept["edits"]["loss_mask"]
    assert mask[-len(turns[2]["completion_ids"]) :] == [1] * len(turns[2]["completion_ids"])
    assert kept["keeps"]["tokens"] == split["keeps"]["tokens"]
    said, dropped = await _export(url, tmp_path / "drop.jsonl", "drop")
    assert list(dropped) == ["keeps"] and "left out" in said
