"""Helpers shared by the three dialects' body translators and validators.

* Typed reads of native bodies that name the offending field, and small value codecs
  (tool-call arguments as JSON text, images as URLs).
* Exact type checks for the validators' shortcuts (each dialect's ``plain`` module):
  exact types, as orjson builds them (a bool is not an int here).
* Extras. A parser keeps each native field it does not consume in the ``extra`` of the
  canonical object it builds (the request, a message, a part, a tool). A renderer for
  the same dialect writes them back; a renderer for another dialect passes them to
  :func:`kept_extras`, which lets null values go and decides every other field by the
  translation table (:mod:`rolltap.dialects.allowlist`): mapped, dropped (recorded in
  the render's :class:`~rolltap.dialects._drops.Sink`) or left to the policy (dropped
  and recorded, or a 400 naming the field). A few extra keys have the same meaning in
  several dialects and every renderer reads them (:data:`PORTABLE`): ``role`` on a
  system text or message (``developer``/``system``), ``strict`` on a tool, ``detail``
  on an image.

Render errors name fields by their place in the canonical request
(``messages[i].parts[j]``, ``system[j]``, ``tools[k]``) and their native name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from rolltap.dialects._drops import Sink, UnsupportedError
from rolltap.dialects.allowlist import Level, lookup, nested
from rolltap.dialects.canonical import Image, Message, Part, Reasoning, Request, Text, ToolResult
from rolltap.errors import InvalidRequestError

__all__ = [
    "PORTABLE",
    "Ctx",
    "Json",
    "Sink",
    "Tolerance",
    "UnsupportedError",
    "args_object",
    "as_obj",
    "collect",
    "diff",
    "dumps_json",
    "image_from_url",
    "image_url",
    "join",
    "kept_extras",
    "opt_bool",
    "opt_int",
    "opt_list",
    "opt_number",
    "opt_obj",
    "opt_str",
    "optional",
    "overlay",
    "parts_origin",
    "past",
    "plain_function",
    "plain_list",
    "req_list",
    "req_obj",
    "req_str",
    "request_origin",
    "residual",
    "skip",
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


def optional(value: object, *kinds: type) -> bool:
    """``value`` is absent (None) or exactly one of ``kinds``.

    >>> optional(None, str), optional(True, int), optional(2, float, int)
    (True, False, True)
    """
    return value is None or type(value) in kinds


def plain_function(fn: Mapping[str, Any]) -> bool:
    """A function tool's own fields as the parses read them: a string ``name``, and
    optionally a bool ``strict``, a string ``description`` and an object ``parameters``
    (chat's ``tools[i].function``, a Responses tool itself)."""
    return (
        type(fn.get("name")) is str
        and optional(fn.get("strict"), bool)
        and optional(fn.get("description"), str)
        and optional(fn.get("parameters"), dict)
    )


def plain_list(value: object, plain: Callable[[dict[str, Any]], bool]) -> bool:
    """``value`` is absent (None), or a list of objects each of which is ``plain``.

    >>> plain_list(None, bool), plain_list([{"a": 1}], bool), plain_list([{}], bool)
    (True, True, False)
    """
    if value is None:
        return True
    return type(value) is list and all(type(item) is dict and plain(item) for item in value)


PORTABLE = frozenset({"role", "strict", "detail"})


_T = TypeVar("_T")
_U = TypeVar("_U")

Tolerance = bool | Sink
"""How a parser meets an element with no canonical form: ``False`` raises, ``True``
(validation) skips it so the ones after it are still checked, a :class:`Sink`
(translation) drops and records it or refuses, by its policy."""


def skip(exc: UnsupportedError, tolerant: Tolerance) -> None:
    """Go past the element ``exc`` names, as ``tolerant`` says (or raise ``exc``)."""
    if isinstance(tolerant, Sink):
        tolerant.skipped(exc)
    elif not tolerant:
        raise exc


def collect(items: Iterable[_T], convert: Callable[[int, _T], _U], tolerant: Tolerance) -> list[_U]:
    """``convert(j, item)`` for each item; an item with no canonical form is passed to
    :func:`skip` (validation goes on to check the ones after it)."""
    out: list[_U] = []
    for j, item in enumerate(items):
        try:
            out.append(convert(j, item))
        except UnsupportedError as exc:
            skip(exc, tolerant)
    return out


def residual(obj: Json, known: Container[str]) -> Json:
    """The fields of ``obj`` a parser did not consume, in their order."""
    return {k: v for k, v in obj.items() if k not in known}


def overlay(base: Json, extra: Json) -> Json:
    """``base`` with ``extra`` merged in: objects key by key, anything else (arrays
    included) taken from ``extra``.

    >>> overlay({"a": {"b": 1}, "l": [1, 2]}, {"a": {"c": 2}, "l": [3]})
    {'a': {'b': 1, 'c': 2}, 'l': [3]}
    """
    out = dict(base)
    for key, value in extra.items():
        have = out.get(key)
        if isinstance(have, dict) and isinstance(value, dict):
            out[key] = overlay(have, value)
        else:
            out[key] = value
    return out


def diff(native: Json, base: Json) -> Json:
    """The fields of ``native`` that ``base`` (the rendering of the canonical fields
    alone) does not reproduce; ``overlay(base, diff(native, base))`` restores them.

    >>> diff({"a": 1, "b": {"c": 2, "d": 3}, "e": 4}, {"a": 1, "b": {"c": 2}})
    {'b': {'d': 3}, 'e': 4}
    """
    out: Json = {}
    for key, value in native.items():
        if key not in base:
            out[key] = value
        elif isinstance(value, dict) and isinstance(base[key], dict):
            nested = diff(value, base[key])
            if nested:
                out[key] = nested
        elif value != base[key] or type(value) is not type(base[key]):
            out[key] = value
    return out


def kept_extras(extra: Json, *, own: bool, ctx: Ctx, level: Level, where: str) -> Json:
    """The extras a renderer writes: all but the portable ones when they are its own;
    none when they come from another dialect, each decided by the translation table
    (:mod:`rolltap.dialects.allowlist`): mapped, dropped and recorded, or left to the
    policy (dropped and recorded, or refused)."""
    if own:
        return {k: v for k, v in extra.items() if k not in PORTABLE}
    for key, value in extra.items():
        if value is None or key in PORTABLE:
            continue
        if level == "request" and key == "tools" and isinstance(value, list):
            for tool in value:  # the tools the canonical model has no form for, each
                kind = tool.get("type") if isinstance(tool, dict) else None
                ctx.decide("tool", f"tools[type={kind}]", "type", kind)
            continue
        ctx.decide(level, join(where, key), key, value)
    return {}


class Ctx:
    """Whose extras a renderer for dialect ``name`` meets. A strict one (requests)
    decides each foreign extra by the translation table, recording what it drops in
    ``sink`` (none given: a sink that refuses what the policy covers); a lenient one
    (responses: the upstream has answered already) ignores them."""

    __slots__ = ("name", "origin", "own", "sink", "strict")

    def __init__(
        self, name: str, origin: str | None, *, strict: bool = True, sink: Sink | None = None
    ) -> None:
        self.name = name
        self.origin = origin
        self.own = origin == name
        self.strict = strict
        self.sink = Sink("refuse", name) if sink is None else sink

    def extras(self, extra: Json, level: Level, where: str) -> Json:
        """The extras to write for one object (see :func:`kept_extras`)."""
        if not (self.own or self.strict):
            return {}
        return kept_extras(extra, own=self.own, ctx=self, level=level, where=where)

    def decide(self, level: Level, path: str, field: str, value: Any) -> None:
        """One foreign field, at ``path``: its row's action (no row: the policy)."""
        origin = self.origin or "any"
        if isinstance(value, dict) and nested(origin, level, field):
            for key, inner in value.items():  # the table names the fields inside
                if inner is not None:
                    self.decide(level, f"{path}.{key}", f"{field}.{key}", inner)
            return
        row = lookup(origin, level, field, self.name, value)
        if row is None:
            self.sink.unsupported(path, f"has no equivalent in the {self.name} dialect")
        elif row.action == "dropped":
            self.sink.drop(path, row.reason)
        elif row.action == "policy":
            self.sink.unsupported(path, row.reason)

    def lacks(self, level: Level, path: str, field: str) -> None:
        """A canonical ``field`` (at ``path``) this dialect has no place for: decided by
        the table's ``any`` row for it. Nothing to decide on an answer (lenient)."""
        if not self.strict:
            return
        row = lookup("any", level, field, self.name)
        if row is None:  # the renderers ask only about fields the table names
            raise InvalidRequestError(f"the {self.name} dialect has no such field", field=path)
        if row.action == "dropped":
            self.sink.drop(path, row.reason)
        elif row.action == "policy":
            self.sink.unsupported(path, row.reason)


def _bears(extra: Json) -> bool:
    return any(key not in PORTABLE for key in extra)


def _part_bears(part: Part) -> bool:
    if _bears(part.extra):
        return True
    if isinstance(part, Reasoning):
        return part.signature is not None
    if isinstance(part, ToolResult):
        return any(_bears(c.extra) for c in part.content)
    return False


def _message_bears(message: Message) -> bool:
    return _bears(message.extra) or any(_part_bears(p) for p in message.parts)


def request_origin(req: Request, name: str) -> str | None:
    """``name`` when ``req`` carries anything only that dialect understands, else None."""
    if req.extra or any(_bears(t.extra) for t in req.system):
        return name
    if any(_bears(t.extra) for t in req.tools):
        return name
    return name if any(_message_bears(m) for m in req.messages) else None


def parts_origin(parts: Iterable[Part], extra: Json, name: str) -> str | None:
    """The ``origin`` of a response with these parts and extras."""
    return name if extra or any(_part_bears(p) for p in parts) else None
