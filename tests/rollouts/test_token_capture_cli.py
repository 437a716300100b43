"""``rolltap eval --capture-tokens`` (and the run config's ``capture_tokens``) on a chat
relay to the simulator, then the training export of what the server tokenized; and the
token client's tokenizer check at start-up (``tokenizer_mismatch``)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import orjson
import pytest

from clikit import arolltap, arolltap_parts, assert_one_line_error
from gateway.simtok import build_sim_tokenizer
from rolltap.sim import SimConfig, Simulator
from rolltap.sim.vocab import VOCAB

AGENT = Path(__file__).with_name("sdk_agent.py")


def _tasks(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(orjson.dumps({"id": "t", "prompt": "hello", "info": {"regex": r"\w+"}}))
    return tasks


def _eval(tmp_path: Path, url: str, endpoint: str, *more: str) -> list[str]:
    return ["eval", str(_tasks(tmp_path)), "--cmd", f"{shlex.quote(sys.executable)} {AGENT}",
            "--endpoint", endpoint, "--model", "sim-model", "--reward", "regex",
            "--store", url, "--json", *more]  # fmt: skip


@pytest.mark.parametrize("how", ["flag", "toml"])
async def test_eval_records_the_servers_ids_and_exports_them(
    how: str, sim: Simulator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    if how == "flag":
        more = ["--capture-tokens", "--capture-logprobs"]
    else:
        config = tmp_path / "run.toml"
        config.write_text("capture_tokens = true\ncapture_logprobs = true\n")
        more = ["--config", str(config)]
    code, out, err = await arolltap_parts(*_eval(tmp_path, url, sim.base_url, *more))
    assert code == 0, err
    summary = orjson.loads(out)
    assert (summary["model_calls"], summary["reward"]["mean"]) == (1, 1.0)
    assert sim.stats.last_request_body is not None
    assert sim.stats.last_request_body["return_token_ids"] is True
    dest = tmp_path / "train.jsonl"
    code, _, err = await arolltap_parts(
        "sessions", "export", "--store", url, "--format", "tokens", "-o", str(dest)
    )  # fmt: skip
    assert code == 0, err
    (line,) = [orjson.loads(raw) for raw in dest.read_bytes().splitlines()]
    (turn,) = line["turns"]
    assert turn["prompt_reuse"] == "server"
    assert turn["prompt_ids"] == VOCAB.encode(
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    )
    assert turn["completion_ids"][-1] == VOCAB.eos
    assert len(turn["completion_logprobs"]) == len(turn["completion_ids"])
    assert line["tokens"] == turn["prompt_ids"] + turn["completion_ids"]
    assert line["loss_mask"] == [0] * len(turn["prompt_ids"]) + [1] * len(turn["completion_ids"])
    # the flag is kept with the run, as its TOML field
    runs = await arolltap("runs", "list", "--store", url, "--json")
    (run,) = [orjson.loads(raw) for raw in runs.stdout.splitlines()]
    assert run["config"]["run"]["capture_tokens"] is True, run


async def test_a_tokenizer_the_server_disagrees_with_stops_eval_before_any_session(
    tmp_path: Path,
) -> None:
    tokenizer = build_sim_tokenizer(tmp_path / "tok")
    url = f"sqlite:///{tmp_path}/runs.db"
    async with Simulator(SimConfig(tokenize_mismatch_at=5)) as sim:
        done = await arolltap(*_eval(tmp_path, url, sim.base_url, "--client", "tokens",
                                     "--tokenizer", str(tokenizer)))  # fmt: skip
        assert sim.stats.requests == 0  # no rollout sampled anything
    line = assert_one_line_error(done, 2, "tokenizer_mismatch")
    assert "from id 5 on" in line and str(tokenizer) in line and "sim-model" in line
    for listing in (("runs", "list"), ("sessions", "list")):
        shown = await arolltap(*listing, "--store", url, "--json")
        assert shown.code == 0 and not shown.stdout.strip(), shown.output


async def test_a_server_without_tokenize_is_not_checked(tmp_path: Path) -> None:
    tokenizer = build_sim_tokenizer(tmp_path / "tok")
    url = f"sqlite:///{tmp_path}/runs.db"
    # it would disagree, were it asked: the run goes on because it cannot be
    config = SimConfig(tokenize=False, tokenize_mismatch_at=0)
    async with Simulator(config) as sim:
        code, out, err = await arolltap_parts(*_eval(
            tmp_path, url, sim.base_url, "--client", "tokens", "--tokenizer", str(tokenizer)
        ))  # fmt: skip
    assert code == 0, err
    assert orjson.loads(out)["model_calls"] == 1


async def test_capture_without_an_endpoint_is_refused_before_the_local_model(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    done = await arolltap("eval", str(_tasks(tmp_path)), "--harness", "chat", "--store", url,
                          "--capture-tokens")  # fmt: skip
    line = assert_one_line_error(done, 2, "invalid_config")
    assert "capture_tokens needs an endpoint" in line
