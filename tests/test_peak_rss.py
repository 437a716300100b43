"""``peak_rss``: a process's own peak, not the one it inherits from its parent."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rolltap.proc.memory import peak_rss, readings

pytestmark = pytest.mark.timeout(60)

_CHILD = "from rolltap.proc.memory import peak_rss; print(peak_rss())"


def test_a_child_of_a_big_process_reports_its_own_peak() -> None:
    ballast = bytearray(256 * 2**20)  # resident: bytearray zero-fills what it allocates
    assert peak_rss() >= readings().rss >= len(ballast)
    # ru_maxrss would say ≥ 256 MiB here: it survives fork + exec
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, check=True)
    assert int(out.stdout) < 128 * 2**20
