"""The three wire dialects by name, each with its upstream path and translators.

A dialect is a folder (``chat/``, ``messages/``, ``responses/``) whose ``__init__``
exposes its :class:`~rolltap.dialects.canonical.Dialect` as ``DIALECT``; a new
dialect is a new folder and a line here.

>>> get_dialect("messages").path
'/v1/messages'
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from rolltap.dialects import chat, messages, responses
from rolltap.dialects.canonical import Dialect, DialectName
from rolltap.errors import ConfigError

__all__ = ["DIALECTS", "DialectName", "get_dialect"]

DIALECTS: Mapping[str, Dialect] = MappingProxyType(
    {d.name: d for d in (chat.DIALECT, messages.DIALECT, responses.DIALECT)}
)


def get_dialect(name: str) -> Dialect:
    """The dialect called ``name``; :class:`ConfigError` for any other name.

    >>> get_dialect("chat").path
    '/v1/chat/completions'
    """
    try:
        return DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ConfigError(f"unknown dialect {name!r} (known: {known})") from None
