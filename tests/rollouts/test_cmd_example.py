"""examples/cmd_harness.py through `rolltap eval --cmd` against the simulator: the
subprocess contract docs/cli.md documents (environment, task file, result file, exit code)."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path

import orjson

from rolltap.sim import Simulator
from rolltap.store import Store

EXAMPLE = Path(__file__).parents[2] / "examples" / "cmd_harness.py"
CLI = "from rolltap.cli.main import main; main()"


async def test_the_example_harness_runs_through_eval_cmd(sim: Simulator, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "p", "prompt": "1, 2, 3,", "info": {"regex": r"\w"}},
        {"id": "m", "messages": [{"role": "system", "content": "count"},
                                 {"role": "user", "content": "a b c"}], "info": {"regex": r"\w"}},
        # a prompt the example cannot send (no "prompt" key is read for it): it crashes
        {"id": "x", "messages": [], "info": {"regex": r"\w"}},
    ]  # fmt: skip
    tasks.write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    url = f"sqlite:///{tmp_path}/runs.db"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, "eval", str(tasks), "--cmd", command,
        "--endpoint", sim.base_url, "--model", "sim-model", "--reward", "regex",
        "--store", url, "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    summary = orjson.loads(out)
    assert summary["statuses"] == {"completed": 2, "failed": 1}
    async with await Store.open(url) as store:
        sessions = {s.task["task_id"]: s for s in await store.list_sessions()}
        assert (sessions["p"].status, sessions["p"].reward) == ("completed", 1.0)
        assert sessions["x"].status == "failed"
        # the exit status and the end of stderr make the rollout's error
        crashed = await store.events(sessions["x"].id)
        error = [e.payload for e in crashed if e.kind == "status"][-1]["error"]
        assert "exited with status 1" in error and "KeyError" in error
        for task_id, sent in (("p", 1), ("m", 2)):
            assert sessions[task_id].task["task"]["id"] == task_id
            events = await store.events(sessions[task_id].id)
            request = next(e.payload for e in events if e.kind == "model_request")
            assert len(request["messages"]) == sent
            outputs = [e.payload for e in events if e.kind == "harness_output"]
            assert outputs == [
                {"stream": "stderr", "text": f"task {task_id}: {sent} message(s) sent\n",
                 "bytes": len(f"task {task_id}: {sent} message(s) sent\n")}
            ]  # fmt: skip
