"""Child processes: the watchdog that keeps any child from outliving rolltap, and
descriptions of how a child exited."""

from rolltap.proc.exits import describe_exit
from rolltap.proc.guard import guard, prepare, release

__all__ = ["describe_exit", "guard", "prepare", "release"]
