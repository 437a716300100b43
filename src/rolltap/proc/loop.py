"""The event loop rolltap's processes run on: uvloop where it is installed (a core
dependency on Linux and macOS), else asyncio's own. ``ROLLTAP_LOOP=asyncio`` opts out;
``ROLLTAP_LOOP=uvloop`` insists (an error where uvloop is missing).

The gateway, ``rolltap eval``, ``rolltap serve``'s workers and the simulator run their
``main`` through :func:`run`; a library user's own loop is never replaced.

>>> import asyncio
>>> async def answer() -> int:
...     await asyncio.sleep(0)
...     return 42
>>> run(answer())
42
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from rolltap.errors import ConfigError

__all__ = ["LOOP_ENV", "loop_factory", "loop_name", "run"]

#: the variable that chooses the loop: ``auto`` (default), ``uvloop`` or ``asyncio``
LOOP_ENV = "ROLLTAP_LOOP"
_CHOICES = ("auto", "uvloop", "asyncio")

T = TypeVar("T")


def _choice() -> str:
    choice = os.environ.get(LOOP_ENV, "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ConfigError(
            f"{LOOP_ENV}={choice!r}: use one of {', '.join(_CHOICES)} (auto: uvloop if installed)"
        )
    return choice


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when it is to be used, else None (asyncio's loop)."""
    choice = _choice()
    if choice == "asyncio":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError as exc:
        if choice == "uvloop":
            raise ConfigError(
                f"{LOOP_ENV}=uvloop but uvloop is not installed (pip install uvloop)"
            ) from exc
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: the loop :func:`run` would use here."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the chosen loop (see the module docs)."""
    try:
        factory = loop_factory()
    except ConfigError:
        main.close()  # never awaited: said by the error, not by a warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
