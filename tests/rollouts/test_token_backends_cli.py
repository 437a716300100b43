"""``rolltap eval --client tokens --completions-api …`` (and the run config's
``completions_api``) for the ``/generate`` backends, against the simulator, then the
training export of what was sampled."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import orjson
import pytest

from clikit import arolltap_parts
from gateway.simtok import build_sim_tokenizer
from rolltap.sim import Simulator
from rolltap.sim.vocab import VOCAB

AGENT = Path(__file__).with_name("sdk_agent.py")


@pytest.mark.parametrize(("api", "how"), [("sglang", "flag"), ("vllm-generate", "toml")])
async def test_eval_samples_through_a_generate_backend(
    api: str, how: str, sim: Simulator, tmp_path: Path
) -> None:
    tokenizer = build_sim_tokenizer(tmp_path / "tok")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(orjson.dumps({"id": "t", "prompt": "hello", "info": {"regex": r"\w+"}}))
    url = f"sqlite:///{tmp_path}/runs.db"
    args = ["eval", str(tasks), "--cmd", f"{shlex.quote(sys.executable)} {AGENT}",
            "--endpoint", sim.base_url, "--model", "sim-model", "--reward", "regex",
            "--store", url, "--json", "--client", "tokens",
            "--tokenizer", str(tokenizer)]  # fmt: skip
    if how == "flag":
        args += ["--completions-api", api]
    else:
        config = tmp_path / "run.toml"
        config.write_text(f'completions_api = "{api}"\n')
        args += ["--config", str(config)]
    code, out, err = await arolltap_parts(*args)
    assert code == 0, err
    summary = orjson.loads(out)
    assert (summary["model_calls"], summary["no_model_calls"]) == (1, 0)
    assert summary["reward"]["mean"] == 1.0
    dest = tmp_path / "train.jsonl"
    code, _, err = await arolltap_parts(
        "sessions", "export", "--store", url, "--format", "tokens", "-o", str(dest)
    )  # fmt: skip
    assert code == 0, err
    (line,) = [orjson.loads(raw) for raw in dest.read_bytes().splitlines()]
    (turn,) = line["turns"]
    assert turn["completion_ids"][-1] == VOCAB.eos
    assert len(turn["completion_logprobs"]) == len(turn["completion_ids"])
    assert line["tokens"] == turn["prompt_ids"] + turn["completion_ids"]
