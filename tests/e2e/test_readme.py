"""README command 1 is what works: its ``rolltap eval …`` part, run as written from the
repository root against the local model, prints a summary with non-zero rewards."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers import require_local_extra

pytestmark = [pytest.mark.llama, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def readme_eval_argv() -> list[str]:
    """The arguments of the ``rolltap eval`` in the README's first shell block."""
    block = (ROOT / "README.md").read_text().split("```bash", 1)[1].split("```", 1)[0]
    line = next(line for line in block.splitlines() if "rolltap eval" in line)
    argv = shlex.split(line.split("&&")[-1])
    assert Path(argv[0]).name == "rolltap" and argv[1] == "eval", line
    return argv[2:]


def test_readme_command_1_gives_real_rewards(tmp_path: Path) -> None:
    require_local_extra()
    store = tmp_path / "readme.db"
    env = dict(os.environ, ROLLTAP_STORE=f"sqlite:///{store}")
    argv = [sys.executable, "-m", "rolltap", "eval", *readme_eval_argv()]
    shown = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "reward" in shown.stdout
    assert "Traceback" not in shown.stdout + shown.stderr
    assert store.exists()
    as_json = subprocess.run(
        [*argv, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540
    )
    assert as_json.returncode == 0, as_json.stderr[-3000:]
    summary = orjson.loads(as_json.stdout)
    assert summary["reward"]["mean"] > 0
