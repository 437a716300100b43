"""Seeded structural mutations of JSON bodies, headers and request lines.

A mutation starts from a route's valid body and breaks one thing: a node replaced by a
value of the wrong type (null, huge numbers, huge strings, deep nesting, invalid UTF-8,
lone surrogates), a key dropped, added or duplicated, or the serialized bytes cut,
flipped or prefixed. :class:`Raw` and :class:`Dup` let the writer emit what no JSON
library writes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["Dup", "Raw", "dumps", "mutate_body", "mutate_bytes"]

Node = Any
Path = list[str | int]


@dataclass(frozen=True, slots=True)
class Raw:
    """Bytes written verbatim where a JSON value goes."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Dup:
    """An object written with these (possibly repeated) key/value pairs."""

    pairs: tuple[tuple[str, Node], ...]


def dumps(node: Node) -> bytes:
    """JSON for ``node``, with :class:`Raw` and :class:`Dup` written as they are."""
    if isinstance(node, Raw):
        return node.data
    if isinstance(node, Dup):
        items = (orjson.dumps(k) + b":" + dumps(v) for k, v in node.pairs)
        return b"{" + b",".join(items) + b"}"
    if isinstance(node, dict):
        return dumps(Dup(tuple(node.items())))
    if isinstance(node, list):
        return b"[" + b",".join(dumps(v) for v in node) + b"]"
    if isinstance(node, int) and not isinstance(node, bool) and abs(node) >= 2**63:
        return str(node).encode()  # orjson refuses to write these; a client may not
    return orjson.dumps(node)


def _deep(depth: int, opener: bytes, closer: bytes) -> Raw:
    return Raw(opener * depth + closer * depth)


def _wrong_value(rng: random.Random, huge: int) -> tuple[str, Node]:
    """A value of some type a field does not expect, and its name."""
    choices: list[tuple[str, Callable[[], Node]]] = [
        ("null", lambda: None),
        ("true", lambda: True),
        ("zero", lambda: 0),
        ("negative", lambda: -rng.randint(1, 10**6)),
        ("int64_max", lambda: 2**63 - 1),
        ("int_over_64", lambda: 2**64 + rng.randint(1, 99)),
        ("int_huge", lambda: Raw(b"9" * rng.randint(30, 5000))),
        ("float_huge", lambda: 1.7e308),
        ("float_overflow", lambda: Raw(b"1e99999")),
        ("float_tiny", lambda: 5e-324),
        ("neg_zero", lambda: Raw(b"-0.0")),
        ("nan", lambda: Raw(rng.choice([b"NaN", b"Infinity", b"-Infinity"]))),
        ("empty_string", lambda: ""),
        ("string", lambda: "x" * rng.randint(1, 64)),
        ("string_huge", lambda: "y" * rng.randint(huge // 4, huge)),
        ("string_control", lambda: "\u0000\u202e\ufeff\ud7ff\U0010ffff"),
        ("string_bad_utf8", lambda: Raw(b'"a\xff\xfe\xc3("')),
        ("string_surrogate", lambda: Raw(rng.choice([b'"\\ud800"', b'"\\udfff x"']))),
        ("empty_list", lambda: []),
        ("empty_object", lambda: {}),
        ("list_many", lambda: [None] * rng.randint(100, 10_000)),
        ("list_of_strings", lambda: ["a", "b"]),
        ("object_many", lambda: {f"k{i}": i for i in range(rng.randint(100, 5_000))}),
        ("deep_list", lambda: _deep(rng.choice([64, 600, 5_000, 100_000]), b"[", b"]")),
        ("deep_object", lambda: Raw(b'{"a":' * 3_000 + b"1" + b"}" * 3_000)),
        ("number_string", lambda: "12"),
    ]
    name, make = rng.choice(choices)
    return name, make()


def _paths(node: Node, prefix: Path) -> list[Path]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, [*prefix, key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, [*prefix, i])
    return out


def _replace(node: Node, path: Path, value: Node) -> Node:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict) and isinstance(head, str):
        return {**node, head: _replace(node[head], rest, value)}
    if isinstance(node, list) and isinstance(head, int):
        return [*node[:head], _replace(node[head], rest, value), *node[head + 1 :]]
    return node


def _get(node: Node, path: Path) -> Node:
    for step in path:
        node = node[step]
    return node


def mutate_body(doc: dict[str, Any], rng: random.Random, *, huge: int) -> tuple[str, bytes]:
    """One structural mutation of ``doc``: its name and the body bytes."""
    paths = _paths(doc, [])
    path = rng.choice(paths)
    where = ".".join(str(p) for p in path) or "$"
    kind = rng.random()
    if kind < 0.6:
        name, value = _wrong_value(rng, huge)
        return f"{name}@{where}", dumps(_replace(doc, path, value))
    target = _get(doc, path)
    if not isinstance(target, dict) or not target:
        containers = [p for p in paths if isinstance(_get(doc, p), dict) and _get(doc, p)]
        path = rng.choice(containers)
        target = _get(doc, path)
        where = ".".join(str(p) for p in path) or "$"
    key = rng.choice(list(target))
    if kind < 0.75:
        rest = {k: v for k, v in target.items() if k != key}
        return f"drop:{key}@{where}", dumps(_replace(doc, path, rest))
    if kind < 0.85:
        _, value = _wrong_value(rng, 64)
        extra = {**target, rng.choice(["zz_unknown", "__proto__", "", "\u00e9"]): value}
        return f"unknown_key@{where}", dumps(_replace(doc, path, extra))
    _, other = _wrong_value(rng, 64)
    pairs = (*target.items(), (key, other))
    if rng.random() < 0.5:
        pairs = ((key, other), *target.items())
    return f"dup:{key}@{where}", dumps(_replace(doc, path, Dup(pairs)))


def _flip(body: bytes, pos: int, rng: random.Random) -> bytes:
    if not body:
        return b"\x00"
    return body[:pos] + bytes([body[pos] ^ (1 << rng.randint(0, 7))]) + body[pos + 1 :]


def mutate_bytes(body: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Break the serialized body itself."""
    pos = rng.randint(0, max(0, len(body) - 1))
    choices: list[tuple[str, Callable[[], bytes]]] = [
        ("truncate", lambda: body[:pos]),
        ("flip", lambda: _flip(body, pos, rng)),
        ("insert_ff", lambda: body[:pos] + b"\xff" + body[pos:]),
        ("bom", lambda: b"\xef\xbb\xbf" + body),
        ("utf16", lambda: body.decode("utf-8", "replace").encode("utf-16")),
        ("trailing_garbage", lambda: body + b"}}]] garbage"),
        ("two_documents", lambda: body + body),
        ("empty", lambda: b""),
        ("whitespace", lambda: b" \n\t "),
        ("not_an_object", lambda: rng.choice([b"[]", b"1", b'"s"', b"null", b"true"])),
        ("nul_bytes", lambda: b"\x00" * rng.randint(1, 4096)),
        ("random_bytes", lambda: rng.randbytes(rng.randint(1, 4096))),
    ]  # fmt: skip
    name, make = rng.choice(choices)
    return name, make()
