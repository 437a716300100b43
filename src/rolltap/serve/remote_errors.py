"""An error a worker reported (its :meth:`~rolltap.errors.RolltapError.to_dict`), raised again
on the supervisor as the class it was, so a caller gets the worker's code and status.

>>> err = error_from_wire({"code": "paused", "status": 503, "message": "still paused"})
>>> type(err).__name__, err.code, err.status
('PausedError', 'paused', 503)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from rolltap.errors import (
    AmbiguousIdError,
    InvalidRequestError,
    RolltapError,
    UpstreamStatusError,
)

__all__ = ["error_from_wire"]


@functools.cache
def _classes() -> dict[str, type[RolltapError]]:
    """Every rolltap error class by its code (the first one defined wins)."""
    found: dict[str, type[RolltapError]] = {}
    todo: list[type[RolltapError]] = [RolltapError]
    while todo:
        cls = todo.pop(0)
        found.setdefault(cls.code, cls)
        todo += [kid for kid in cls.__subclasses__() if kid.__module__.startswith("rolltap.")]
    return found


def error_from_wire(error: Mapping[str, Any]) -> RolltapError:
    """The error ``error`` (``code``, ``status``, ``message``, …) describes: its class by
    ``code`` (an upstream's status error keeps the upstream's status); an unknown code
    is a plain ``RolltapError`` naming it."""
    code, message = str(error.get("code") or ""), str(error.get("message") or "worker error")
    status = error.get("status")
    retry = error.get("retry_after")
    retry_after = float(retry) if isinstance(retry, int | float) else None
    cls = _classes().get(code)
    if cls is UpstreamStatusError:
        known = status if isinstance(status, int) and 400 <= status < 600 else 502
        return UpstreamStatusError(message, upstream_status=known, retry_after=retry_after)
    if cls is None or cls is AmbiguousIdError:
        return RolltapError(f"{code}: {message}" if code else message, retry_after=retry_after)
    if issubclass(cls, InvalidRequestError):
        # its message already names the field
        return cls(message)
    return cls(message, retry_after=retry_after)
