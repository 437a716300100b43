"""Judging one answer: the invariants every answer to hostile input must keep.

* no 5xx;
* an error answer carries rolltap's body with a ``code`` that the gateway contract's error
  table (``docs/gateway.md``) documents, at the status that code always has — except
  framing errors that aiohttp's own HTTP parser answers (plain text, 400) before rolltap
  sees a request;
* a success answer is well formed for its media type (JSON, SSE, NDJSON, text);
* an answer comes, unless the request was cut short on purpose.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from rolltap import errors
from rolltap.fuzz.wire import Mode, RawAnswer, RawRequest

__all__ = ["Tally", "documented_codes", "error_statuses", "judge", "stray_exceptions"]

#: the error table's rows: ``| case | status | `code` … |``
_ROW = re.compile(r"^\|[^|]+\|[^|]+\|(?P<codes>[^|]+)\|\s*$")


def documented_codes(doc: Path) -> set[str]:
    """Every code in the error table of ``doc``'s ``### Errors`` section (``docs/gateway.md``)."""
    text = doc.read_text(encoding="utf-8")
    section = text.split("### Errors", 1)[1].split("\n### ", 1)[0]
    codes: set[str] = set()
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            codes.update(re.findall(r"`([a-z_]+)`", match["codes"]))
    return codes


def error_statuses() -> dict[str, int]:
    """The status each of rolltap's codes is answered with."""
    return {
        cls.code: cls.status
        for cls in vars(errors).values()
        if inspect.isclass(cls) and issubclass(cls, errors.RolltapError)
    }


@dataclass
class Tally:
    """What a fuzz run saw."""

    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    #: answers by aiohttp's own parser (framing errors), exempt from the body checks
    framing: int = 0
    #: requests cut short on purpose (no answer expected)
    cut: int = 0
    hangs: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)

    def violation(self, req: RawRequest, what: str) -> None:
        self.violations += 1
        if len(self.examples) < 20:
            self.examples.append(f"{req.label}: {what}")


def _framing(ans: RawAnswer) -> bool:
    return ans.status == 400 and ans.content_type == "text/plain" and not ans.body.startswith(b"{")


def _error_code(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _check_code(code: str | None, status: int, known: set[str], statuses: dict[str, int]) -> str:
    """'' when ``code`` at ``status`` is documented; else what is wrong."""
    if code is None:
        return "error body without rolltap's code"
    if code not in known:
        return f"undocumented code {code!r}"
    if code == "upstream_http_error":
        return "" if 400 <= status < 500 else f"upstream status {status} passed through"
    if statuses.get(code) != status:
        return f"code {code!r} at {status}, documented {statuses.get(code)}"
    return ""


def _stream_problem(ans: RawAnswer, known: set[str], statuses: dict[str, int]) -> str:
    """Check each SSE data / NDJSON line parses; an in-band error must be documented."""
    if ans.content_type == "text/event-stream":
        lines = [ln[5:].strip() for ln in ans.body.split(b"\n") if ln.startswith(b"data:")]
        lines = [ln for ln in lines if ln != b"[DONE]"]
    else:
        lines = [ln for ln in ans.body.split(b"\n") if ln.strip()]
    for line in lines:
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            return f"unparsable stream line {line[:80]!r}"
        code = _error_code(item)
        if code is not None and code not in known:
            return f"undocumented in-band code {code!r}"
    return ""


def judge(
    req: RawRequest, ans: RawAnswer | None, tally: Tally, known: set[str], statuses: dict[str, int]
) -> None:
    """Count ``ans`` and record a violation of any invariant."""
    tally.sent += 1
    parts = req.label.split(":")
    tally.families[parts[1] if len(parts) > 1 else parts[0]] += 1
    if ans is None:
        if req.mode is Mode.CUT or req.mode is Mode.CUT_ANSWER:
            tally.cut += 1
        elif req.parser_refuses:
            tally.framing += 1
        else:
            tally.violation(req, "no answer")
        return
    tally.statuses[ans.status] += 1
    if ans.status >= 500:
        tally.violation(req, f"{ans.status} {ans.body[:200]!r}")
        return
    if req.mode is Mode.CUT_ANSWER:
        return
    if ans.status >= 400:
        if _framing(ans):
            tally.framing += 1
            return
        try:
            code = _error_code(orjson.loads(ans.body))
        except orjson.JSONDecodeError:
            code = None
        if code is not None:
            tally.codes[code] += 1
        problem = _check_code(code, ans.status, known, statuses)
    elif ans.status < 200 or ans.status >= 300:
        problem = f"unexpected status {ans.status}"
    elif ans.content_type == "application/json":
        try:
            orjson.loads(ans.body)
            problem = ""
        except orjson.JSONDecodeError:
            problem = "unparsable JSON answer"
    elif ans.content_type in ("text/event-stream", "application/x-ndjson"):
        problem = _stream_problem(ans, known, statuses)
    else:
        problem = "" if ans.content_type == "text/plain" else f"media type {ans.content_type!r}"
    if problem:
        tally.violation(req, f"{ans.status}: {problem}; {ans.body[:160]!r}")


_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*)$", re.M)
#: what aiohttp's HTTP parser raises (and logs) for a request it refuses itself
_PARSER_EXCEPTIONS = ("aiohttp.http_exceptions.", "aiohttp.web_protocol.RequestPayloadError",
                      "zlib.error")  # fmt: skip


def stray_exceptions(log: str) -> list[str]:
    """The exceptions a server's log shows that are not aiohttp's parser refusing a
    request (aiohttp logs those, with tracebacks, before rolltap sees a request)."""
    return [line for line in _EXC_LINE.findall(log) if not line.startswith(_PARSER_EXCEPTIONS)]
