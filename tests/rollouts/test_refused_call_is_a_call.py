"""A harness whose only call the gateway refused did call the model through the gateway:
its rollout fails with the refusal's code, and is not flagged ``no_model_calls`` (nor
warned about as a harness that ignores the base URL it is given)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from rollouts.evalkit import eval_one, the_session
from rolltap.sim import Simulator

#: one call the gateway refuses (a conversation that is not a list), then exit 1
HARNESS = """
import os, sys, urllib.error, urllib.request
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=b'{"model": "m", "messages": "say 42"}',
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"},
)
try:
    urllib.request.urlopen(request)
except urllib.error.HTTPError as err:
    print("refused:", err.code, file=sys.stderr)
    sys.exit(1)
"""


async def test_a_refused_call_counts_as_a_call(sim: Simulator, tmp_path: Path) -> None:
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS)
    task = {"id": "t", "prompt": "say 42", "answer": "42"}
    code, out, err, url = await eval_one(
        sim, tmp_path, task, f"{sys.executable} {harness}", "contains"
    )
    # the run failed, for the reason the gateway gave, and nothing says it made no call
    assert code == 1, err
    assert err.strip().splitlines()[-1] == (
        "error [run_failed] no rollout completed (invalid_request × 1)"
    )
    assert "no model call" not in err
    summary = orjson.loads(out)
    assert summary["statuses"] == {"failed": 1}
    assert (summary["model_calls"], summary["no_model_calls"]) == (0, 0)
    assert sim.stats.requests == 0  # refused by the gateway, never sent upstream
    _, events = await the_session(url)
    kinds = [e.kind for e in events]
    assert "note" not in kinds
    request, error = (e.payload for e in events if e.kind in ("model_request", "model_error"))
    assert request["sent"] is False and request["params"]["messages"] == "say 42"
    assert (error["code"], error["field"]) == ("invalid_request", "messages")
    status = [e.payload for e in events if e.kind == "status"][-1]
    assert status["status"] == "failed" and "no_model_calls" not in status
