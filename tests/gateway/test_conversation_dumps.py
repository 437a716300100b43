"""DumpIndex: known JSON arrays found as prefixes of longer ones, by either hash."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import orjson
import pytest

from rolltap.gateway.conversation_dumps import FAST, DumpIndex, DumpKey, Hash

HASHES = pytest.mark.parametrize("new", [hashlib.sha256, FAST], ids=["sha256", "xxh3"])


def _dumps(n: int) -> list[bytes]:
    """The dumps of one growing array, 1 to ``n`` elements (nested, with commas inside)."""
    items = [{"i": i, "text": f"turn {i}, [x]", "nested": [i, {"k": "]"}]} for i in range(n)]
    return [orjson.dumps(items[: k + 1]) for k in range(n)]


@HASHES
def test_the_longest_known_prefix_is_found_and_its_state_resumes(
    new: Callable[[], Hash],
) -> None:
    index: DumpIndex[int] = DumpIndex(new)
    dumps = _dumps(12)
    for k in (0, 3, 7):
        index.add(index.key(dumps[k])[0], k)
    hit = index.longest(dumps[10])
    assert hit is not None
    known, size, head = hit
    assert (known, size) == (7, len(dumps[7]))
    # the state covers dumps[10][:size], so the longer dump's key resumes from it
    assert index.key(dumps[10], head, size - 1)[0] == index.key(dumps[10])[0]
    assert index.longest(dumps[7]) is not None  # a dump is its own longest prefix
    assert index.longest(b'[{"other":1}]') is None


@HASHES
def test_a_key_extended_is_the_key_of_the_longer_dump(new: Callable[[], Hash]) -> None:
    index: DumpIndex[int] = DumpIndex(new)
    dumps = _dumps(6)
    key, state = index.key(dumps[2])
    more = b"[" + dumps[5][len(dumps[2]) : -1] + b"]"  # elements 3 to 5
    longer, _ = key.extended(state, more)
    assert longer == index.key(dumps[5])[0]
    index.add(index.key(dumps[4])[0], 4)
    assert index.longest_past(key, state, more) == 4
    assert index.longest_past(longer, index.key(dumps[5])[1], b'[{"j":0}]') is None


def test_the_indexes_hash_differently_and_a_key_is_only_found_by_its_own() -> None:
    dump = _dumps(3)[2]
    sha: DumpIndex[str] = DumpIndex(hashlib.sha256)
    fast: DumpIndex[str] = DumpIndex(FAST)
    sha_key, fast_key = sha.key(dump)[0], fast.key(dump)[0]
    assert sha_key.digest == hashlib.sha256(dump[:-1] + b"]").digest()
    assert (sha_key.size, sha_key.tail) == (fast_key.size, fast_key.tail)
    assert sha_key.digest != fast_key.digest
    fast.add(sha_key, "wrong hash")
    assert fast.longest(dump) is None
    assert DumpKey.of(dump, new=FAST)[0] == fast_key
