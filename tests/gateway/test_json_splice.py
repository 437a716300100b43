"""Rewritten fields set in a relayed body's own bytes (:mod:`rolltap.http.json_splice`):
either the result parses to the rewritten body, with every other byte as the harness
wrote it, or the splice declines and the body is encoded."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolltap.http.json_splice import VERIFY_MAX, splice_fields

_HISTORY = [{"role": "user", "content": "x" * 50}] * 200


def _checked(raw: bytes, changes: dict[str, Any]) -> bytes | None:
    """The splice of ``changes`` into ``raw``, checked against the parsed rewrite."""
    body = orjson.loads(raw)
    out = splice_fields(raw, changes, set(body))
    if out is not None:
        assert orjson.loads(out) == {**body, **changes}
    return out


@pytest.mark.parametrize(
    "dumps",
    [orjson.dumps, lambda v: json.dumps(v).encode(), lambda v: json.dumps(v, indent=2).encode()],
    ids=["compact", "spaced", "indented"],
)
def test_the_model_is_set_where_it_stands_whether_first_or_last(dumps: Any) -> None:
    for body in (
        {"model": "a", "messages": _HISTORY, "stream": True},
        {"messages": _HISTORY, "model": "a", "temperature": 0.5},
    ):
        raw = dumps(body)
        out = _checked(raw, {"model": "the-endpoint's"})
        assert out is not None
        # everything else as the harness wrote it
        old, new = raw.split(b'"a"', 1), out.split(b'"the-endpoint\'s"', 1)
        assert old == new


def test_a_field_the_body_lacks_is_added_at_its_end() -> None:
    raw = orjson.dumps({"model": "a", "messages": _HISTORY})
    out = _checked(raw, {"model": "b", "seed": 7, "stream_options": {"include_usage": True}})
    assert out is not None and out.endswith(b',"seed":7,"stream_options":{"include_usage":true}}')
    assert _checked(b"{}", {"seed": 1}) == b'{"seed":1}'
    assert _checked(b'{"a": 1}  \n', {"seed": 1}) == b'{"a": 1,"seed":1}  \n'


@pytest.mark.parametrize(
    "raw",
    [
        # another object's "model" beside the body's own
        b'{"metadata": {"model": "a"}, "model": "a", "messages": []}',
        # written twice: which one a server reads is its own choice
        b'{"model": "a", "messages": [], "model": "a"}',
        # written with an escape
        b'{"mod\\u0065l": "a", "messages": []}',
        # a value that is not a plain scalar
        b'{"model": "a\\"b", "messages": []}',
        b'{"model": {"name": "a"}, "messages": []}',
        # the only "model" written plainly is a value, not the key
        b'{"mod\\u0065l": "a", "role": "model"}',
        # far from both ends: not shown to be the object's own
        orjson.dumps({"messages": _HISTORY * 2, "model": "a", "tools": _HISTORY * 2}),
    ],
    ids=["nested", "twice", "escaped", "escaped-value", "object", "as-a-value", "middle"],
)
def test_it_declines_where_it_cannot_be_sure(raw: bytes) -> None:
    assert _checked(raw, {"model": "b"}) is None


def test_it_declines_more_replacements_than_it_scans_for() -> None:
    raw = orjson.dumps({"model": "a", "temperature": 1, "top_p": 1, "messages": []})
    assert _checked(raw, {"model": "b", "temperature": 0}) is not None
    assert _checked(raw, {"model": "b", "temperature": 0, "top_p": 0.5}) is None


def test_a_key_just_within_reach_of_either_end_is_shown_to_be_the_objects_own() -> None:
    pad = "p" * (VERIFY_MAX - 30)
    head = orjson.dumps({"pad": pad, "model": "a", "messages": _HISTORY})
    tail = orjson.dumps({"messages": _HISTORY, "model": "a", "pad": pad})
    assert _checked(head, {"model": "b"}) is not None
    assert _checked(tail, {"model": "b"}) is not None


_KEYS = st.sampled_from(["model", "messages", "m", "seed", "x"])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.sampled_from(["model", "a", 'q"uote', "back\\slash", ""])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)


@given(
    st.dictionaries(_KEYS, _SCALARS | _VALUES, max_size=5),
    st.dictionaries(_KEYS, st.sampled_from(["b", 0, 1.5, True, None]), min_size=1, max_size=2),
    st.sampled_from([None, 2]),
)
def test_any_body_either_parses_to_its_rewrite_or_is_declined(
    body: dict[str, Any], changes: dict[str, Any], indent: int | None
) -> None:
    raw = json.dumps(body, indent=indent).encode()
    _checked(raw, changes)
