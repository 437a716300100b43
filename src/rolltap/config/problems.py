"""One wording for a configuration that does not validate, wherever it was read."""

from __future__ import annotations

from pydantic import ValidationError

from rolltap.errors import ConfigError

__all__ = ["config_error"]


def config_error(source: str, exc: ValidationError, *, whole: str = "") -> ConfigError:
    """A :class:`ConfigError` naming ``source`` and the first bad field of ``exc``
    (``whole`` where the problem is with the whole table, or nothing).

    A model validator's message is ours: it goes without pydantic's "Value error, "."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or whole
    where = f"{source}: {field}: " if field else f"{source}: "
    return ConfigError(where + first["msg"].removeprefix("Value error, "))
