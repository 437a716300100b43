"""No silent empty captures: a ``--cmd`` harness that never calls the model (it prints
the task, which a ``contains`` reward scores 1.0) is flagged ``no_model_calls`` in its
result, its events and the run summary, warned about at the end of ``rolltap eval``, and
left out of the token export unless asked."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from clikit import arolltap_parts
from rollouts.evalkit import eval_one, the_session
from rolltap.sim import Simulator

AGENT = Path(__file__).with_name("sdk_agent.py")


async def test_a_harness_that_makes_no_call_is_flagged(sim: Simulator, tmp_path: Path) -> None:
    task = {"id": "t", "prompt": "say 42", "answer": "42"}
    code, out, err, url = await eval_one(
        sim, tmp_path, task, 'cat "$ROLLTAP_TASK_FILE"', "contains"
    )
    assert code == 0, err
    summary = orjson.loads(out)
    assert summary["reward"]["mean"] == 1.0  # the task's answer is in the task it printed
    assert (summary["model_calls"], summary["no_model_calls"]) == (0, 1)
    # the warning is the last thing said
    assert err.strip().splitlines()[-1].startswith("warning: 1 of 1 rollout(s) made no model call")
    session, events = await the_session(url)
    notes = [e.payload for e in events if e.kind == "note"]
    assert [n["text"] for n in notes] == ["no_model_calls"]
    status = [e.payload for e in events if e.kind == "status"][-1]
    assert status["status"] == "completed" and status["no_model_calls"] is True
    # the training export leaves it out (an error: nothing else to export) unless asked
    dest = tmp_path / "out.jsonl"
    code, _, err = await arolltap_parts(
        "sessions", "export", "--store", url, "--format", "tokens", "-o", str(dest)
    )  # fmt: skip
    assert code != 0 and "no_model_calls" in err and not dest.exists()
    code, _, err = await arolltap_parts(
        "sessions", "export", "--store", url, "--format", "tokens", "-o", str(dest),
        "--include-empty",
    )  # fmt: skip
    assert code == 0, err
    (line,) = [orjson.loads(raw) for raw in dest.read_bytes().splitlines()]
    assert line["session_id"] == session.id and line["turns"] == [] and line["segments"] == []
    assert line["metadata"]["no_model_calls"] is True


async def test_a_harness_that_calls_the_model_is_not_flagged(
    sim: Simulator, tmp_path: Path
) -> None:
    task = {"id": "ok", "prompt": "hello", "info": {"regex": r"\w+"}}
    code, out, err, url = await eval_one(sim, tmp_path, task, f"{sys.executable} {AGENT}", "regex")
    assert code == 0, err
    summary = orjson.loads(out)
    assert (summary["model_calls"], summary["no_model_calls"]) == (1, 0)
    assert "no model call" not in err
    _, events = await the_session(url)
    assert not [e for e in events if e.kind == "note"]
    assert "no_model_calls" not in [e.payload for e in events if e.kind == "status"][-1]
