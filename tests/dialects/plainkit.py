"""Single edits of a request body, for the tests of the validators' shortcuts
(``plainly_valid`` of :mod:`rolltap.dialects.chat.plain`, ``_messages_plain`` and
``_responses_plain``), and the check that what is not plain is still refused by name.

A shortcut is sound when every body it calls plain passes the parse; these edits put a
bad value (or nothing) at each place of a body the parse accepts, so each check the
shortcut makes meets a body that only that check refuses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from rolltap.errors import InvalidRequestError

__all__ = ["REMOVED", "edit", "places", "refused_field", "single_edits"]

REMOVED = object()
"""The edit that deletes the key at a place instead of setting it."""


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a bad value can go (each key and item, and a new key)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        out.append((*path, "new"))
        for k, v in value.items():
            out += [(*path, k), *places(v, (*path, k))]
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += [(*path, i), *places(v, (*path, i))]
    return out


def edit(body: dict[str, Any], place: tuple[Any, ...], value: Any) -> bool:
    """Put ``value`` (a copy) at ``place`` in ``body``, or delete it for :data:`REMOVED`;
    False when there is nothing there to delete."""
    *parent, last = place
    holder: Any = body
    for key in parent:
        holder = holder[key]
    if value is not REMOVED:
        holder[last] = copy.deepcopy(value)
    elif isinstance(holder, dict) and last in holder:
        del holder[last]
    else:
        return False
    return True


def single_edits(body: dict[str, Any], junk: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """Copies of ``body`` with each single edit: every place given each bad value, or
    removed."""
    for place in places(body):
        for value in [*junk, REMOVED]:
            changed = copy.deepcopy(body)
            if edit(changed, place, value):
                yield changed


Body = dict[str, Any]


def refused_field(
    body: Body,
    plainly_valid: Callable[[Body, int], bool],
    validate_body: Callable[[Body, int], Any],
) -> str | None:
    """The field a dialect's validation names for ``body``, which its shortcut must not
    call plain (the parse is what names it)."""
    assert not plainly_valid(body, 0)
    with pytest.raises(InvalidRequestError) as caught:
        validate_body(body, 0)
    return caught.value.field
