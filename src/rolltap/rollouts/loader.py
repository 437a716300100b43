"""Resolve a user's ``NAME`` or ``module:function`` to a callable (harnesses, rewards)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from rolltap.errors import ConfigError

__all__ = ["load_callable"]


def load_callable(spec: str, builtins: Mapping[str, Any], kind: str) -> Callable[..., Any]:
    """A built-in by name, else ``module:function`` imported; ``ConfigError`` otherwise.

    >>> load_callable("len", {"len": len}, "helper") is len
    True
    """
    if spec in builtins:
        found: Callable[..., Any] = builtins[spec]
        return found
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        known = ", ".join(sorted(builtins))
        raise ConfigError(f"unknown {kind} {spec!r}: use one of {known} or module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{kind} {spec!r}: cannot import {module_name}: {exc}") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{kind} {spec!r}: {module_name} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]
