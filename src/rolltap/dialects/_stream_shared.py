"""Helpers shared by the stream parsers and renderers of every dialect.

Usage convention (the same in every dialect module): canonical ``input_tokens`` counts
the whole prompt, cache reads included (OpenAI's ``prompt_tokens`` meaning), and
``cache_read_tokens`` is the cached share of it. Anthropic counts cache reads and
writes apart from ``input_tokens``, so its parser adds them and its renderer subtracts
the reads.
"""

from __future__ import annotations

from typing import Any

import orjson

from rolltap.dialects.canonical import Usage
from rolltap.errors import RolltapError, UpstreamProtocolError
from rolltap.http.json_body import stream_event_object as load_object

__all__ = [
    "UpstreamStreamError",
    "dict_field",
    "dumps",
    "error_fields",
    "int_field",
    "load_object",
    "openai_usage",
    "opt_int",
    "str_field",
    "stream_error",
]

dumps = orjson.dumps


class UpstreamStreamError(UpstreamProtocolError):
    """The upstream reported an error inside a stream (Anthropic ``event: error``,
    Responses ``response.failed``/``error``, chat ``data: {"error": ...}``).

    ``upstream_error`` is the upstream's own error object, kept for the recorder;
    ``upstream_type`` its ``type`` (e.g. ``overloaded_error``) when it had one.
    """

    code = "upstream_stream_error"

    def __init__(self, message: str, *, upstream_error: dict[str, Any]) -> None:
        super().__init__(message)
        self.upstream_error = upstream_error
        kind = upstream_error.get("type") or upstream_error.get("code")
        self.upstream_type: str | None = kind if isinstance(kind, str) else None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["upstream_error"] = self.upstream_error
        return out


def stream_error(dialect: str, error: object) -> UpstreamStreamError:
    """The exception for an upstream's in-band error object (whatever its shape)."""
    obj: dict[str, Any] = error if isinstance(error, dict) else {"message": str(error)}
    message = obj.get("message")
    text = message if isinstance(message, str) and message else "upstream stream error"
    return UpstreamStreamError(f"{dialect} stream: upstream error: {text}", upstream_error=obj)


def str_field(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise UpstreamProtocolError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


def int_field(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UpstreamProtocolError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value


def dict_field(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise UpstreamProtocolError(f"{where}: {key!r} must be an object, got {value!r}")
    return value


def opt_int(obj: object, key: str) -> int | None:
    """``obj[key]`` when ``obj`` is a dict holding an integer there, else None."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def openai_usage(raw: object, input_key: str, output_key: str) -> Usage:
    """Usage from an OpenAI object (chat: prompt/completion_tokens, Responses:
    input/output_tokens; both put cache reads and reasoning in ``*_details``)."""
    if not isinstance(raw, dict):
        return Usage()
    prefix = input_key.removesuffix("_tokens")
    details_in = raw.get(f"{prefix}_tokens_details")
    details_out = raw.get(f"{output_key.removesuffix('_tokens')}_tokens_details")
    return Usage(
        input_tokens=opt_int(raw, input_key) or 0,
        output_tokens=opt_int(raw, output_key) or 0,
        cache_read_tokens=opt_int(details_in, "cached_tokens"),
        reasoning_tokens=opt_int(details_out, "reasoning_tokens"),
    )


def error_fields(err: RolltapError) -> dict[str, Any]:
    """The OpenAI-style error object for an in-band error frame."""
    return {"message": err.message, "type": err.type, "code": err.code, "param": None}
