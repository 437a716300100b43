"""Renderers built on several threads at once in a fresh process all load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tokens.tokkit import build_tokenizer_dir

SCRIPT = """
import sys, threading
from pathlib import Path
from rolltap.tokens._hf import load_tokenizer

errors = []
def load():
    try:
        load_tokenizer(Path(sys.argv[1]))
    except Exception as exc:  # noqa: BLE001 - reported to the test below
        errors.append(repr(exc))

threads = [threading.Thread(target=load) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(errors)
sys.exit(1 if errors else 0)
"""


def test_first_loads_on_four_threads_of_a_fresh_process_all_succeed(tmp_path: Path) -> None:
    directory = build_tokenizer_dir(tmp_path / "tok")
    # a fresh interpreter: transformers must not be imported yet for the race to exist
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(directory)], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
