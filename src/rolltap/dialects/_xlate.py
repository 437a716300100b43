"""Helpers shared by the non-streaming translators of the three dialects.

Extras. A parser keeps each native field it does not consume in the ``extra`` of the
canonical object it builds (the request, a message, a part, a tool). A renderer for
the same dialect writes them back; a renderer for another dialect passes them to
:func:`kept_extras`, which lets null values go and decides every other field by the
translation table (:mod:`rolltap.dialects.allowlist`): mapped, dropped (recorded in the
render's :class:`~rolltap.dialects._drops.Sink`) or left to the policy (dropped and
recorded, or a 400 naming the field). A few extra keys have the same meaning
in several dialects and every renderer reads them (:data:`PORTABLE`): ``role`` on a
system text or message (``developer``/``system``), ``strict`` on a tool, ``detail`` on
an image.

Render errors name fields by their place in the canonical request
(``messages[i].parts[j]``, ``system[j]``, ``tools[k]``) and their native name.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any, TypeVar

from rolltap.dialects._drops import Sink, UnsupportedError
from rolltap.dialects._fields import join
from rolltap.dialects.allowlist import Level, lookup, nested
from rolltap.dialects.canonical import Message, Part, Reasoning, Request, ToolResult
from rolltap.errors import InvalidRequestError

__all__ = [
    "PORTABLE",
    "Ctx",
    "Json",
    "Sink",
    "Tolerance",
    "UnsupportedError",
    "collect",
    "diff",
    "kept_extras",
    "overlay",
    "parts_origin",
    "request_origin",
    "residual",
    "skip",
]

Json = dict[str, Any]

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
