"""Tables whose ids are never cut: on a narrow terminal lesser columns go first.

An id column is never shortened to ``7ba5b25…`` (a user copies ids from these tables):
it keeps its full width, and only if the ids alone are wider than the terminal does
rich fold them onto a second line. Columns marked with a ``drop`` rank are left out,
highest rank first, until the table fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

__all__ = ["Column", "fitted_table"]


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    #: the column holds ids: shown whole (folded, never cut, when nothing else fits)
    ident: bool = False
    #: 0: always shown; otherwise left out, highest first, while the table is too wide
    drop: int = 0


def fitted_table(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]],
    *, title: str | None = None,
) -> Table:  # fmt: skip
    """A table of ``rows`` that fits ``console``'s width, ids whole."""
    keep = list(range(len(columns)))
    droppable = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop)
    for index in droppable:
        if _width(console, _table(columns, rows, keep, title)) <= console.width:
            break
        keep.remove(index)
    return _table(columns, rows, keep, title)


def _width(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def _table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], keep: list[int], title: str | None
) -> Table:
    # no outer edges and a plain rule: two ids and a status fit in 80 columns
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title,
                  title_justify="left")  # fmt: skip
    for i in keep:
        column = columns[i]
        if column.ident:
            longest = max((len(row[i]) for row in rows), default=0)
            table.add_column(column.header, no_wrap=True, overflow="fold",
                             min_width=max(longest, len(column.header)))  # fmt: skip
        else:
            table.add_column(column.header)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table
