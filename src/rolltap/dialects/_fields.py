"""Typed reads of native bodies that name the offending field, and small value codecs
(tool-call arguments as JSON text, images as URLs) shared by the translators."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from rolltap.dialects.canonical import Image, Text
from rolltap.errors import InvalidRequestError

__all__ = [
    "args_object",
    "as_obj",
    "dumps_json",
    "image_from_url",
    "image_url",
    "join",
    "opt_bool",
    "opt_int",
    "opt_list",
    "opt_number",
    "opt_obj",
    "opt_str",
    "past",
    "req_list",
    "req_obj",
    "req_str",
    "texts_of",
]

Json = dict[str, Any]


def past(body: Json, key: str, start: int) -> Json:
    """``body`` with the list at ``key`` cut to its items from ``start`` on (what is left
    to check of a body whose first ``start`` items were checked before).

    >>> past({"messages": [1, 2, 3], "model": "m"}, "messages", 2)
    {'messages': [3], 'model': 'm'}
    """
    value = body.get(key)
    if start <= 0 or not isinstance(value, list):
        return body
    return {**body, key: value[start:]}


def join(where: str, key: str) -> str:
    """``where.key``, or ``key`` at the top level.

    >>> join("messages[0]", "content"), join("", "model")
    ('messages[0].content', 'model')
    """
    return f"{where}.{key}" if where else key


# --- JSON text -------------------------------------------------------------------------


def dumps_json(value: Any) -> str:
    """Compact JSON text (the form tool-call arguments take when built from an object)."""
    return orjson.dumps(value).decode()


def args_object(text: str, field: str) -> dict[str, Any]:
    """Tool-call arguments as the object Anthropic's ``input`` needs; blank text is ``{}``.

    >>> args_object('{"x": 1}', "arguments")
    {'x': 1}
    """
    if not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"is not valid JSON ({exc})", field=field) from exc
    if not isinstance(value, dict):
        raise InvalidRequestError("must be a JSON object", field=field)
    return value


# --- images ----------------------------------------------------------------------------

_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.DOTALL)


def image_from_url(url: str, extra: Json) -> Image:
    """An image from a chat/Responses URL: ``data:`` base64 URLs become inline images.

    >>> image_from_url("data:image/png;base64,AAAA", {}).media_type
    'image/png'
    """
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return Image("url", url, extra=extra)
    return Image("base64", match[2], match[1] or None, extra=extra)


def image_url(image: Image) -> str:
    """The URL form of ``image`` (a ``data:`` URL for inline images)."""
    if image.source == "url":
        return image.data
    return f"data:{image.media_type or ''};base64,{image.data}"


# --- typed reads that name the offending field --------------------------------------


def _bad(where: str, key: str, what: str) -> InvalidRequestError:
    return InvalidRequestError(f"must be {what}", field=join(where, key))


def req_str(obj: Json, key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _bad(where, key, "a string")
    return value


def opt_str(obj: Json, key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(where, key, "a string")
    return value


def opt_int(obj: Json, key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise _bad(where, key, "an integer")
    return value


def opt_number(obj: Json, key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise _bad(where, key, "a number")
    return value


def opt_bool(obj: Json, key: str, where: str) -> bool | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, bool):
        raise _bad(where, key, "a boolean")
    return value


def req_obj(obj: Json, key: str, where: str) -> Json:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise _bad(where, key, "an object")
    return value


def opt_obj(obj: Json, key: str, where: str) -> Json | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, dict):
        raise _bad(where, key, "an object")
    return value


def req_list(obj: Json, key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        raise _bad(where, key, "an array")
    return value


def opt_list(obj: Json, key: str, where: str) -> list[Any] | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, list):
        raise _bad(where, key, "an array")
    return value


def as_obj(value: Any, where: str) -> Json:
    """``value`` when it is an object, else a 400 naming ``where``."""
    if not isinstance(value, dict):
        raise InvalidRequestError("must be an object", field=where)
    return value


def texts_of(parts: Iterable[Text | Image], where: str, target: str) -> list[Text]:
    """The texts of a text-only slot (a chat tool result, a system prompt)."""
    out: list[Text] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Text):
            raise InvalidRequestError(
                f"the {target} dialect carries only text here", field=f"{where}[{j}]"
            )
        out.append(part)
    return out
