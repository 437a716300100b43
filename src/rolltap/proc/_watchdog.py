"""The watchdog process: kills the process groups it was told about once its parent dies.

Run by path with ``python -I -S`` (no package import: it must start in milliseconds and
hold no memory). Its stdin is one end of a socket pair whose other end only the parent
holds; the parent writes ``+PGID`` when it starts a child group and ``-PGID`` when that
group is gone. EOF on stdin means the parent exited, however it exited (SIGKILL
included): every group still registered gets SIGTERM, then SIGKILL after a grace period.
"""

import contextlib
import os
import signal
import sys
import time

GRACE_S = 2.0


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_all(groups: set[int], sig: int) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
            os.killpg(pgid, sig)


def _reap(groups: set[int]) -> None:
    _signal_all(groups, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        groups = {g for g in groups if _alive(g)}
        if not groups:
            return
        time.sleep(0.05)
    _signal_all(groups, signal.SIGKILL)


def main() -> None:
    # Ctrl-C at the terminal is the parent's to handle; the watchdog outlives it on purpose.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        op, value = line[:1], line[1:].strip()
        if not value.isdigit():
            continue
        if op == b"+":
            groups.add(int(value))
        elif op == b"-":
            groups.discard(int(value))
    _reap(groups)


if __name__ == "__main__":
    main()
