"""The real agents through the token client against the real llama-server (Gemma 3 270M):
one headless turn each, as `rolltap eval --harness claude-code|codex --client tokens` runs
it with no endpoint. The agent exits 0 and every call's token record is complete.

The agents' prompts are trimmed by their own flags (`[harness] args`): Claude Code's full
first turn is ~19k tokens and Codex's ~10k, minutes of prompt processing for llama.cpp on
two cores; what this checks (the protocol path, the ids) does not depend on their size.
A stop at the first newline ends the 270M base model's answer as a stop sequence: an
agent takes that as a finished turn (a `max_tokens` stop is an error to Claude Code).
The token client streams a request with stop strings from llama-server (a whole answer
leaves out the stop word's probabilities), so the newline's id has its logprob too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers import require_agent, require_local_extra

pytestmark = [pytest.mark.llama, pytest.mark.timeout(600)]

_SAMPLING = '\n[sampling]\ntemperature = 0\nmax_tokens = 48\nstop = ["\\n"]\n'
_ARGS = {
    "claude-code": '["--tools", "", "--system-prompt", "Answer in one word."]',
    "codex": '["-c", "include_permissions_instructions=false", "-c", '
    '"include_environment_context=false", "-c", "tools.web_search=false", "-c", '
    '"features.multi_agent=false"]',
}


@pytest.mark.parametrize(("harness", "binary"), [("claude-code", "claude"), ("codex", "codex")])
def test_an_agent_turn_through_the_token_client(harness: str, binary: str, tmp_path: Path) -> None:
    require_local_extra()
    require_agent(binary)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "hello", "prompt": "Say hello in one word."}\n')
    config = tmp_path / "run.toml"
    config.write_text(f"[harness]\nargs = {_ARGS[harness]}\n{_SAMPLING}")
    store = tmp_path / "agents.db"
    argv = [
        sys.executable, "-m", "rolltap", "eval", str(tasks), "--harness", harness,
        "--client", "tokens", "--config", str(config), "--store", f"sqlite:///{store}",
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=560
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    export = tmp_path / "sessions.jsonl"
    subprocess.run(
        [sys.executable, "-m", "rolltap", "sessions", "export", "--store", f"sqlite:///{store}",
         "-o", str(export)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (session,) = [orjson.loads(line) for line in export.read_text().splitlines()]
    events = session["events"]
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "status" and events[-1]["payload"]["status"] == "completed"
    assert kinds.count("model_request") == kinds.count("model_response") >= 1
    assert "model_error" not in kinds
    for event in events:
        if event["kind"] == "model_response":
            tokens = event["payload"]["tokens"]
            assert tokens["prompt_ids"] and tokens["completion_ids"]
            # every sampled id has its logprob, the stop word's (the newline) included
            logprobs = tokens["completion_logprobs"] or []
            assert len(logprobs) == len(tokens["completion_ids"])
            assert all(isinstance(lp, float) for lp in logprobs)
