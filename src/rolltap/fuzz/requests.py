"""From a route and a seed to one hostile request (the same seed: the same request)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from rolltap.fuzz.mutate import dumps, mutate_body, mutate_bytes
from rolltap.fuzz.wire import Mode, RawRequest

__all__ = ["Route", "build_request"]

JSON_TYPE = (b"Content-Type", b"application/json")
#: mutations aiohttp's parser answers itself (see RawRequest.parser_refuses)
_PARSER_REFUSES = {
    "huge_header_9000", "huge_header_70000", "many_headers_500", "many_headers_2000",
    "header_ctl", "bad_header_name", "long_path",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Route:
    """One route of the API under test, with a valid request to start from."""

    name: str
    method: str
    path: str
    token: str
    body: dict[str, Any] | None = None
    weight: float = 1.0


def _auth(token: str) -> tuple[bytes, bytes]:
    return (b"Authorization", b"Bearer " + token.encode())


def _header_mutation(rng: random.Random, route: Route) -> tuple[str, list[tuple[bytes, bytes]]]:
    good = [_auth(route.token), JSON_TYPE]
    kind = rng.randrange(9)
    if kind == 0:
        size = rng.choice([4_000, 9_000, 70_000])
        return f"huge_header_{size}", [*good, (b"X-Fuzz", b"v" * size)]
    if kind == 1:
        count = rng.choice([100, 500, 2_000])
        return f"many_headers_{count}", good + [(b"X-F%d" % i, b"1") for i in range(count)]
    if kind == 2:
        value = rng.choice([b"text/plain", b"application/x-www-form-urlencoded", b"\xff\xfe",
                            b"multipart/form-data; boundary=x", b""])  # fmt: skip
        return "content_type", [_auth(route.token), (b"Content-Type", value)]
    if kind == 3:
        return "dup_auth", [*good, (b"Authorization", b"Bearer wrong")]
    if kind == 4:
        return "header_bad_utf8", [*good, (b"X-Fuzz", b"\xff\xfe\xc3(")]
    if kind == 5:
        return "header_ctl", [*good, (b"X-Fuzz", b"a\x01b\x7f")]
    if kind == 6:
        return "expect_continue", [*good, (b"Expect", b"100-continue")]
    if kind == 7:
        return "encoding", [*good, (b"Content-Encoding", rng.choice([b"gzip", b"br", b"zz"]))]
    return "bad_header_name", [*good, (b"X Bad(Name)", b"1")]


def _auth_mutation(rng: random.Random, route: Route) -> tuple[str, list[tuple[bytes, bytes]]]:
    token = route.token.encode()
    choices = [
        ("missing", []),
        ("wrong", [(b"Authorization", b"Bearer " + token[:-1] + b"X")]),
        ("prefix", [(b"Authorization", b"Bearer " + token[: len(token) // 2])]),
        ("x_api_key", [(b"x-api-key", token)]),
        ("basic", [(b"Authorization", b"Basic " + token)]),
        ("bad_utf8", [(b"Authorization", b"Bearer \xff\xfe" + token)]),
        ("huge", [(b"Authorization", b"Bearer " + b"k" * 8_000)]),
        ("empty", [(b"Authorization", b"Bearer ")]),
    ]
    name, headers = rng.choice(choices)
    return name, [*headers, JSON_TYPE]


def _line_mutation(rng: random.Random, route: Route) -> tuple[str, bytes, bytes]:
    path = route.path.encode()
    choices = [
        ("method", rng.choice([b"PUT", b"PATCH", b"DELETE", b"GET", b"POST", b"FOO"]), path),
        ("tail", route.method.encode(), path + rng.choice([b"/x", b"/", b"/%00", b"/..%2f.."])),
        ("query", route.method.encode(), path + b"?since=" + rng.choice([b"-1", b"x", b"9" * 40,
                                                                          b"%ff", b"1&since=2"])),
        ("long_path", route.method.encode(), path + b"/" + b"p" * 9_000),
        ("unknown_rollout", route.method.encode(),
         path.replace(b"/r/ro_", b"/r/ro_0", 1) if b"/r/ro_" in path else path + b"zz"),
        ("bad_utf8_path", route.method.encode(), path + b"/\xff\xfe"),
    ]  # fmt: skip
    name, method, new_path = rng.choice(choices)
    return name, method, new_path


def build_request(route: Route, seed: str, *, huge: int, stall_share: float) -> RawRequest:
    """One request to ``route``, mutated as ``seed`` decides."""
    rng = random.Random(seed)
    good_body = dumps(route.body) if route.body is not None else b""
    req = RawRequest(route.method.encode(), route.path.encode(), [_auth(route.token), JSON_TYPE],
                     good_body)  # fmt: skip
    r = rng.random()
    family, detail = "good", ""
    if r < 0.07:
        pass
    elif r < 0.55:
        family = "body"
        if route.body is not None:
            detail, req.body = mutate_body(route.body, rng, huge=huge)
        else:  # a body where none is read
            detail, req.body = "get_with_body", dumps({"a": [1, None, "x" * 100]})
    elif r < 0.66:
        family = "bytes"
        detail, req.body = mutate_bytes(good_body or b"{}", rng)
    elif r < 0.76:
        family = "headers"
        detail, req.headers = _header_mutation(rng, route)
    elif r < 0.82:
        family = "line"
        detail, req.method, req.path = _line_mutation(rng, route)
    elif r < 0.88:
        family = "auth"
        detail, req.headers = _auth_mutation(rng, route)
    elif r < 0.92:
        family = "framing"
        req.own_length = True
        lie = rng.choice(["short", "long", "chunked", "bad_chunked", "negative", "two"])
        detail = lie
        req.headers = [*req.headers, *_length_lie(lie, len(req.body))]
        if lie == "chunked":
            req.body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(good_body), good_body)
        elif lie == "bad_chunked":
            req.body = b"zz\r\n" + good_body
    elif r < 0.95:
        family, req.mode = "disconnect", Mode.CUT
    elif r < 0.975:
        family, req.mode = "disconnect_answer", Mode.CUT_ANSWER
        if route.body is not None and "stream" in route.body:
            req.body = dumps({**route.body, "stream": True})
    elif r < 1.0 - stall_share:
        family, req.mode = "trickle", Mode.TRICKLE
        req.pieces, req.delay_s = rng.randint(2, 6), rng.uniform(0.001, 0.02)
    else:
        family, req.mode = "stall", Mode.STALL
        req.body = req.body or b'{"padding": "' + b"p" * 64 + b'"}'
    req.label = f"{route.name}:{family}:{detail}"
    req.parser_refuses = family == "framing" or detail in _PARSER_REFUSES
    return req


def _length_lie(lie: str, size: int) -> list[tuple[bytes, bytes]]:
    if lie == "short":
        return [(b"Content-Length", b"%d" % max(0, size // 2))]
    if lie == "long":
        # a length the body never reaches: the body timeout must answer
        return [(b"Content-Length", b"%d" % (size + 10))]
    if lie in ("chunked", "bad_chunked"):
        return [(b"Transfer-Encoding", b"chunked")]
    if lie == "negative":
        return [(b"Content-Length", b"-5")]
    return [(b"Content-Length", b"%d" % size), (b"Content-Length", b"%d" % (size + 1))]
