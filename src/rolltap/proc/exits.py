"""How a child process ended, in words a user can act on.

>>> describe_exit(-4)
'killed by signal SIGILL (illegal instruction)'
>>> describe_exit(3)
'exited with status 3'
"""

from __future__ import annotations

import signal

__all__ = ["describe_exit", "signal_of"]


def signal_of(returncode: int) -> signal.Signals | None:
    """The signal that killed a child (``subprocess`` and asyncio report it as ``-N``)."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode)
    except ValueError:
        return None


def describe_exit(returncode: int) -> str:
    """``returncode`` as ``exited with status N`` or ``killed by signal NAME (what)``."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    sig = signal_of(returncode)
    if sig is None:
        return f"killed by signal {-returncode}"
    what = signal.strsignal(sig) or sig.name
    return f"killed by signal {sig.name} ({what[:1].lower()}{what[1:]})"
