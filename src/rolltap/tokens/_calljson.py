"""Shared pieces of the tool-call parsers: strict JSON, arguments normalised as
templates write them back, and the scan result every family's scanner returns."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "DECODER", "Scan", "arguments_text", "checked_name", "decode_json_at", "is_utf8",
    "named_call", "skip_space",
]  # fmt: skip

_NON_SPACE = re.compile(r"\S")

#: (text outside the calls, (name, arguments JSON) per call, problems)
Scan = tuple[list[str], list[tuple[str, str]], list[str]]


def _no_constants(name: str) -> Any:
    # NaN and Infinity are Python's JSON extensions, not JSON: arguments must stay portable.
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


DECODER = json.JSONDecoder(parse_constant=_no_constants)


def skip_space(text: str, at: int) -> int:
    """The index of the first non-space character at or after ``at`` (or the end)."""
    found = _NON_SPACE.search(text, at)
    return found.start() if found else len(text)


def is_utf8(text: str) -> bool:
    """False for text holding lone surrogates (from JSON escapes): not storable as UTF-8."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def decode_json_at(text: str, start: int, what: str) -> tuple[Any, int, str]:
    """(the JSON value at ``start`` after spaces, the index after it, "") or (None, start,
    the problem): never raises."""
    try:
        value, end = DECODER.raw_decode(text, skip_space(text, start))
    except json.JSONDecodeError as exc:
        return None, start, f"{what}: invalid JSON ({exc.msg} at character {exc.pos})"
    except (ValueError, RecursionError) as exc:  # over-long numbers, absurd nesting
        return None, start, f"{what}: unreadable JSON ({type(exc).__name__})"
    return value, end, ""


def arguments_text(arguments: Any, what: str) -> tuple[str, str]:
    """(arguments as JSON text, "") for a call's decoded arguments, or ("", the problem).

    A JSON string holding an object is read as that object (some models write them so).
    """
    if isinstance(arguments, str):
        try:
            arguments = DECODER.decode(arguments)
        except (ValueError, RecursionError):
            return "", f"{what}: arguments are not JSON"
    if not isinstance(arguments, dict):
        return "", f"{what}: arguments are not an object"
    # json.dumps's default spacing and ensure_ascii=False are what chat templates' tojson
    # writes, so a call rendered back into the next prompt reads as the model wrote it.
    text = json.dumps(arguments, ensure_ascii=False)
    # A JSON escape of a lone surrogate cannot be stored as UTF-8: keep it escaped.
    return (text if is_utf8(text) else json.dumps(arguments)), ""


def checked_name(name: Any, what: str) -> tuple[str, str]:
    """(the call's name, "") or ("", the problem)."""
    if not isinstance(name, str) or not name:
        return "", f"{what}: no name"
    if not is_utf8(name):
        return "", f"{what}: the name is not valid text"
    return name, ""


def named_call(call: Any, what: str) -> tuple[tuple[str, str] | None, str]:
    """((name, arguments), "") of a decoded ``{"name", "arguments"|"parameters"}`` object,
    or (None, the problem); a call without arguments gets ``{}``."""
    if not isinstance(call, dict):
        return None, f"{what}: not a JSON object"
    name, problem = checked_name(call.get("name"), what)
    if problem:
        return None, problem
    arguments, problem = arguments_text(call.get("arguments", call.get("parameters", {})), what)
    if problem:
        return None, problem
    return (name, arguments), ""
