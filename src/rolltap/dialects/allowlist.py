"""The translation table: what becomes of each field when a call changes dialect.

Each :class:`Row` says, for a field of one dialect (``dialect``) at one ``level`` of a
request, what a translation to each of ``targets`` does with it:

- ``mapped``: the target says the same thing its own way (a canonical field, a second
  spelling of one, a value at the target's default);
- ``dropped``: it changes only presentation, caching or the provider's own state;
  left out and recorded in the request event's ``rewrites``, whatever the policy;
- ``policy``: it means something the target cannot express; left out and recorded
  under the endpoint's ``unsupported = "drop"`` (the default), a 400 naming it under
  ``"refuse"``. A field of another dialect that no row names is ``policy`` too.

Rows of dialect ``any`` name canonical fields (whichever dialect they came from), and
levels ``element`` and ``header`` document what the parsers and the relay upstream do
with whole blocks or items and with vendor headers. A row with ``when`` applies only to
values it accepts (``n`` at 1 is mapped, any other ``n`` is policy); rows of one field
are tried in order. Null values are "not set" in all three APIs and never recorded.
``docs/translation.md`` shows this table (:func:`markdown`; a test keeps them equal).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rolltap.dialects._table_rows import ROWS as _ROWS
from rolltap.dialects._table_rows import Action, Level, Row

__all__ = ["DIALECT_NAMES", "ROWS", "Action", "Level", "Row", "lookup", "markdown", "nested"]

DIALECT_NAMES = ("chat", "messages", "responses")
ROWS: tuple[Row, ...] = _ROWS

_INDEX: dict[tuple[str, Level, str], list[Row]] = {}
for _row in ROWS:
    _INDEX.setdefault((_row.dialect, _row.level, _row.field), []).append(_row)
_PARENTS = frozenset(
    (r.dialect, r.level, r.field.partition(".")[0]) for r in ROWS if "." in r.field
)


def lookup(dialect: str, level: Level, field: str, target: str, value: Any = None) -> Row | None:
    """The row that decides an extra ``field`` (of ``dialect``, at ``level``) rendered to
    ``target``; ``a.*`` rows stand for every field in ``a`` no row names. Rows of fields
    the parser reads (``parsed``) never decide an extra.

    >>> lookup("responses", "request", "store", "chat").action
    'dropped'
    >>> lookup("chat", "request", "n", "messages", 2).action
    'policy'
    >>> lookup("messages", "request", "metadata.tenant", "chat").action
    'dropped'
    >>> lookup("chat", "request", "colour", "messages") is None
    True
    """
    parent, dot, _ = field.rpartition(".")
    for name in (field, f"{parent}.*") if dot else (field,):
        for row in _INDEX.get((dialect, level, name), ()):
            if row.parsed or target not in row.targets:
                continue
            if row.when is None or row.when(value):
                return row
    return None


def nested(dialect: str, level: Level, field: str) -> bool:
    """Whether the table names fields inside ``field`` (``reasoning.summary``) rather
    than ``field`` itself."""
    return (dialect, level, field) in _PARENTS


def _targets(row: Row) -> str:
    others = [d for d in DIALECT_NAMES if d != row.dialect]
    return "any other" if list(row.targets) == others else ", ".join(row.targets)


def _cells(row: Row) -> Iterator[str]:
    yield row.dialect
    yield row.level
    yield f"`{row.field}`" + (f" {row.cond}" if row.cond else "")
    yield _targets(row)
    yield row.action
    yield row.reason


def markdown() -> str:
    """The table as the Markdown ``docs/translation.md`` shows."""
    lines = [
        "| from | level | field | to | action | what happens |",
        "|---|---|---|---|---|---|",
    ]
    lines.extend("| " + " | ".join(_cells(row)) + " |" for row in ROWS)
    return "\n".join(lines) + "\n"
