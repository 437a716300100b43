"""Run and session ids given as a unique prefix, as a user copies them from a table.

An exact id always wins; otherwise a prefix of at least :data:`MIN_PREFIX` characters
must match exactly one id. ``_`` and ``%`` in a prefix (session ids look like
``ro_…``) are matched literally, not as SQL ``LIKE`` wildcards.

>>> like_pattern("ro_1%")
'ro!_1!%%'
"""

from __future__ import annotations

from sqlalchemy import Table, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.errors import AmbiguousIdError
from rolltap.store.errors import StoreNotFoundError

__all__ = ["MAX_CANDIDATES", "MIN_PREFIX", "like_pattern", "resolve_id"]

#: the shortest prefix that is looked up as a prefix (shorter: exact ids only)
MIN_PREFIX = 4
#: the most candidates an ambiguous prefix's error lists
MAX_CANDIDATES = 10
# Not a backslash: MySQL treats it as an escape in string literals, the others do not.
_ESCAPE = "!"


def like_pattern(prefix: str) -> str:
    """A ``LIKE`` pattern (escape character ``!``) matching ids that start with ``prefix``."""
    for char in (_ESCAPE, "%", "_"):
        prefix = prefix.replace(char, _ESCAPE + char)
    return prefix + "%"


async def resolve_id(conn: AsyncConnection, table: Table, prefix: str, what: str) -> str:
    """The one id of ``table`` (runs or sessions) that is ``prefix`` or starts with it.

    Raises StoreNotFoundError when none does, AmbiguousIdError (listing at most
    :data:`MAX_CANDIDATES`) when several do and none is ``prefix`` itself.
    """
    col = table.c.id
    if len(prefix) < MIN_PREFIX:
        if await conn.scalar(select(col).where(col == prefix)) is not None:
            return prefix
        raise StoreNotFoundError(
            f"no {what} {prefix!r} (an id prefix needs at least {MIN_PREFIX} characters)"
        )
    # LIKE can use the primary key's index; the substr comparison makes the match
    # case-sensitive where LIKE is not (SQLite). The shortest id first: an exact match.
    query = (
        select(col)
        .where(col.like(like_pattern(prefix), escape=_ESCAPE))
        .where(func.substr(col, 1, len(prefix)) == prefix)
        .order_by(func.length(col), col)
        .limit(MAX_CANDIDATES + 1)
    )
    found: list[str] = list(await conn.scalars(query))
    if not found:
        raise StoreNotFoundError(f"no {what} {prefix!r}")
    if len(found) == 1 or found[0] == prefix:
        return found[0]
    shown = found[:MAX_CANDIDATES]
    count = f"more than {MAX_CANDIDATES}" if len(found) > MAX_CANDIDATES else str(len(found))
    raise AmbiguousIdError(
        f"{what} id prefix {prefix!r} matches {count} {what}s: {', '.join(shown)}; "
        "give more characters",
        candidates=shown,
    )
