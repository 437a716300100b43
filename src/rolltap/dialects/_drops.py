"""What a translation leaves out, and the policy for what the target cannot express.

A :class:`Sink` goes along one translation (the parse of the harness's body, then the
rendering in the upstream's dialect). Each field the table
(:mod:`rolltap.dialects.allowlist`) says to drop is :meth:`Sink.drop`-ped: recorded,
whatever the policy. A field that means something the target cannot say is
:meth:`Sink.unsupported`: under ``"drop"`` recorded the same way, under ``"refuse"`` a
400 naming it (``param``), as every translation did before the policy existed.

Recorded paths name the place of a field with every list position written ``[]``
(``messages[].parts[].cache_control``), so one field is recorded once per call however
often it appears, and the paths are few enough to count by (``/metrics``). The 400s keep
the concrete position (``messages[3].parts[1].cache_control``).

>>> sink = Sink("drop")
>>> sink.drop("system[2].cache_control", "a caching hint")
>>> sink.drop("system[0].cache_control", "a caching hint")
>>> [d.rewrite() for d in sink.dropped]
[{'dropped': 'system[].cache_control', 'reason': 'a caching hint'}]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from rolltap.errors import InvalidRequestError

__all__ = ["Dropped", "Sink", "Unsupported", "UnsupportedError", "general"]

Unsupported = Literal["drop", "refuse"]
"""What a translation does with a field the target cannot express: drop it (and record
that it did) or refuse the call with a 400 naming it."""

_INDEX = re.compile(r"\[\d+\]")
_TAIL = re.compile(r"\.(type|role)$")


@dataclass(frozen=True, slots=True)
class Dropped:
    """One field a translation left out: where it was and why."""

    path: str
    reason: str

    def rewrite(self) -> dict[str, Any]:
        """The entry the request event's ``rewrites`` gets.

        >>> Dropped("store", "the provider's own storage").rewrite()
        {'dropped': 'store', 'reason': "the provider's own storage"}
        """
        return {"dropped": self.path, "reason": self.reason}


class UnsupportedError(InvalidRequestError):
    """A native element (part, item, role) the canonical model has no form for.

    Validation tolerates these (the body is valid in its own dialect); conversion does
    not, unless a :class:`Sink` lets it drop them. ``kind`` says which element it is
    (``type=document``, ``role=function``), for the record of its dropping.
    """

    def __init__(self, message: str, *, field: str, kind: str | None = None) -> None:
        super().__init__(message, field=field)
        self.reason = message
        self.kind = kind


def general(path: str) -> str:
    """``path`` with each list position written ``[]``.

    >>> general("messages[3].parts[10].cache_control")
    'messages[].parts[].cache_control'
    """
    return _INDEX.sub("[]", path)


class Sink:
    """The drops of one translation, under one policy."""

    __slots__ = ("_seen", "dropped", "policy", "source", "target")

    def __init__(self, policy: Unsupported, target: str = "", source: str | None = None) -> None:
        self.policy: Unsupported = policy
        #: the dialects translated to and from (None: a render outside a translation)
        self.target, self.source = target, source
        self.dropped: list[Dropped] = []
        self._seen: set[Dropped] = set()

    def drop(self, path: str, reason: str) -> None:
        """Record that the field at ``path`` was left out (once per general path)."""
        entry = Dropped(general(path), reason)
        if entry not in self._seen:
            self._seen.add(entry)
            self.dropped.append(entry)

    def unsupported(self, path: str, reason: str) -> None:
        """A field the target cannot express: dropped and recorded, or a 400 naming it."""
        if self.policy == "refuse":
            raise InvalidRequestError(reason, field=path)
        self.drop(path, reason)

    def skipped(self, exc: UnsupportedError) -> None:
        """A parser met an element with no canonical form (``exc``): under ``refuse`` it
        is raised; under ``drop`` the element is left out and recorded as
        ``messages[].content[type=document]``."""
        if self.policy == "refuse":
            raise exc
        path = general(_TAIL.sub("", exc.field or ""))
        if exc.kind is not None and path.endswith("[]"):
            path = f"{path[:-2]}[{exc.kind}]"
        self.drop(path, exc.reason)
