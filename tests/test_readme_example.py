"""The README's Python example (a harness of one's own through ``evaluate``), run as
written against the simulator: its one endpoint URL swapped for the simulator's, its store
set by ``ROLLTAP_STORE``. The front door's code cannot rot unnoticed."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import orjson

from rolltap.sim import Simulator
from rolltap.store import Store

ROOT = Path(__file__).resolve().parents[1]
#: the endpoint the README's example names (a user's vLLM), replaced by the simulator's
EXAMPLE_URL = "http://127.0.0.1:8000/v1"


def readme_python() -> str:
    """The README's first ``python`` block."""
    return (ROOT / "README.md").read_text().split("```python\n", 1)[1].split("```", 1)[0]


def task_prompts() -> list[str]:
    lines = (ROOT / "examples" / "patterns.jsonl").read_text().splitlines()
    return [orjson.loads(line)["prompt"] for line in lines if line.strip()]


async def test_the_readme_python_example_runs_its_harness(sim: Simulator, tmp_path: Path) -> None:
    code = readme_python()
    assert EXAMPLE_URL in code
    store_url = f"sqlite:///{tmp_path}/readme.db"
    env = dict(os.environ, ROLLTAP_STORE=store_url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code.replace(EXAMPLE_URL, sim.base_url), cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=50)
    assert proc.returncode == 0, err.decode()[-3000:]
    run_id = out.decode().split()[0]
    prompts = task_prompts()
    async with await Store.open(store_url) as store:
        sessions = await store.list_sessions(run_id)
        # r=4 rollouts of every task, each ended by the harness's answer
        assert len(sessions) == 4 * len(prompts)
        assert {s.status for s in sessions} == {"completed"}
        events = await store.events(sessions[0].id)
    request = next(e.payload for e in events if e.kind == "model_request")
    # the call is the README harness's own: one user message, its max_tokens
    assert request["messages"][0]["content"] in prompts
    assert request["params"]["max_tokens"] == 16
