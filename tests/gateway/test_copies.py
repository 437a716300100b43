"""Copies made field by field on every call (``dataclasses.replace`` costs several times
more): each keeps every field, so a field added later is not dropped on the way."""

from __future__ import annotations

import dataclasses
from typing import Any

from rolltap.clients.upstream import ModelRequest
from rolltap.gateway.replay import Lookup


def _every_field_set(cls: type[Any], **given: Any) -> Any:
    """An instance of ``cls`` whose every field holds a value of its own."""
    values = {f.name: given.get(f.name, object()) for f in dataclasses.fields(cls)}
    return cls(**values)


def test_a_call_less_its_bytes_and_members_keeps_every_other_field() -> None:
    call = _every_field_set(ModelRequest)
    assert call.without_raw() == dataclasses.replace(call, raw=None, encoded=None)


def test_a_lookup_given_its_conversation_keeps_every_other_field() -> None:
    lookup = _every_field_set(Lookup, conversation=None)
    assert lookup.with_conversation(b"c") == dataclasses.replace(lookup, conversation=b"c")
    kept = dataclasses.replace(lookup, conversation=b"kept")
    assert kept.with_conversation(b"c") is kept  # made once, never replaced
    assert Lookup().with_conversation(b"c") == Lookup()  # digested: nothing kept for later
