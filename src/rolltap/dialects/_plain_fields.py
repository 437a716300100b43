"""Type checks shared by the validators' shortcuts (``_chat_plain``, ``_messages_plain``,
``_responses_plain``): exact types, as orjson builds them (a bool is not an int here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["optional", "plain_function", "plain_list"]


def optional(value: object, *kinds: type) -> bool:
    """``value`` is absent (None) or exactly one of ``kinds``.

    >>> optional(None, str), optional(True, int), optional(2, float, int)
    (True, False, True)
    """
    return value is None or type(value) in kinds


def plain_function(fn: Mapping[str, Any]) -> bool:
    """A function tool's own fields as the parses read them: a string ``name``, and
    optionally a bool ``strict``, a string ``description`` and an object ``parameters``
    (chat's ``tools[i].function``, a Responses tool itself)."""
    return (
        type(fn.get("name")) is str
        and optional(fn.get("strict"), bool)
        and optional(fn.get("description"), str)
        and optional(fn.get("parameters"), dict)
    )


def plain_list(value: object, plain: Callable[[dict[str, Any]], bool]) -> bool:
    """``value`` is absent (None), or a list of objects each of which is ``plain``.

    >>> plain_list(None, bool), plain_list([{"a": 1}], bool), plain_list([{}], bool)
    (True, True, False)
    """
    if value is None:
        return True
    return type(value) is list and all(type(item) is dict and plain(item) for item in value)
