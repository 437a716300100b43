"""The depth a request body may nest (:data:`MAX_JSON_DEPTH`), checked in C."""

from __future__ import annotations

import random
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from rolltap.errors import InvalidRequestError
from rolltap.http.json_body import MAX_JSON_DEPTH, EncodedMembers, check_depth


def _nested(levels: int, inner: Any) -> Any:
    value = inner
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def _too_deep(value: Any) -> bool:
    try:
        check_depth(value)
    except InvalidRequestError:
        return True
    return False


def test_the_limit_counts_every_object_and_array_empty_ones_too() -> None:
    assert not _too_deep(_nested(MAX_JSON_DEPTH, "x"))
    assert not _too_deep(_nested(MAX_JSON_DEPTH - 1, []))
    with pytest.raises(InvalidRequestError, match=f"nested deeper than {MAX_JSON_DEPTH}"):
        check_depth(_nested(MAX_JSON_DEPTH + 1, "x"))
    assert _too_deep(_nested(MAX_JSON_DEPTH, {}))
    # far deeper than what orjson itself writes
    assert _too_deep(_nested(1000, 1))


def test_a_value_refused_by_the_writer_for_another_reason_is_not_too_deep() -> None:
    assert not _too_deep({1: "a key that is not a string"})


def test_threads_checking_at_once_each_get_their_own_answer() -> None:
    values = [_nested(MAX_JSON_DEPTH + i % 2, 0) for i in range(2000)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two steps of a check
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(_too_deep, values))
    finally:
        sys.setswitchinterval(interval)
    assert answers == [i % 2 == 1 for i in range(2000)]


def test_members_refuse_the_depth_the_whole_body_check_refuses() -> None:
    for depth in range(MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH + 3):
        body = {"model": "m", "deep": _nested(depth - 1, "x"), "n": 1}
        if _too_deep(body):
            with pytest.raises(InvalidRequestError, match=f"nested deeper than {MAX_JSON_DEPTH}"):
                EncodedMembers.check(body)
        else:
            EncodedMembers.check(body)
    EncodedMembers.check({})


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(6 if depth < 4 else 3)
    if kind == 0:
        return rng.choice([None, True, 1.5, -7, 'x\u00e9\n"', ""])
    if kind == 1:
        return rng.randrange(10**6)
    if kind == 2:
        return "s" * rng.randrange(40)
    if kind == 3:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randrange(4))}


@pytest.mark.parametrize("seed", range(30))
def test_members_encode_the_body_as_orjson_does_after_any_rewrite(seed: int) -> None:
    rng = random.Random(seed)
    body = {f"f{i}": _value(rng) for i in range(rng.randrange(1, 8))}
    members = EncodedMembers.check(body)
    for _ in range(rng.randrange(4)):  # rewrites: values replaced, members added, removed
        key = f"f{rng.randrange(10)}"
        if rng.random() < 0.2:
            body.pop(key, None)
        else:
            body[key] = _value(rng)
    assert members.encode(body) == orjson.dumps(body)
