"""A hostile client for rolltap's own HTTP servers (tests and ``benchmarks/fuzz.py``).

:func:`fuzz` sends seeded, structurally mutated requests (:mod:`rolltap.fuzz.requests`)
over a raw HTTP client (:mod:`rolltap.fuzz.wire`) to a server in another process and
judges every answer (:mod:`rolltap.fuzz.check`); :mod:`rolltap.fuzz.session` starts
``rolltap gateway`` and ``rolltap serve`` for it.
"""

from __future__ import annotations

from rolltap.fuzz.check import Tally, documented_codes, error_statuses, judge
from rolltap.fuzz.requests import Route, build_request
from rolltap.fuzz.run import FuzzResult, FuzzTarget, fuzz
from rolltap.fuzz.wire import Mode, RawAnswer, RawRequest, send

__all__ = [
    "FuzzResult",
    "FuzzTarget",
    "Mode",
    "RawAnswer",
    "RawRequest",
    "Route",
    "Tally",
    "build_request",
    "documented_codes",
    "error_statuses",
    "fuzz",
    "judge",
    "send",
]
