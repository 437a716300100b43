"""``peak_rss``: a process's own peak, not the one it inherits from its parent."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rolltap.proc.memory import peak_rss, readings

pytestmark = pytest.mark.timeout(60)

_CHILD = "from rolltap.proc.memory import peak_rss; print(peak_rss())"


def test_a_child_of_a_big_process_reports_its_own_peak() -> None:
    # resident: every byte written (a zeroed bytearray may be untouched calloc'd pages)
    ballast = b"\x01" * (256 * 2**20)
    now = readings()  # read first: the peak read after it covers it
    assert peak_rss() >= now.rss >= len(ballast)
    # ru_maxrss would say ≥ 256 MiB here: it survives fork + exec
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, check=True)
    assert int(out.stdout) < 128 * 2**20
