"""Request fields an agent sends unchanged on every call, recorded once per rollout.

An agent resends its tool schemas and system prompt with every call: Claude Code 65 KB of
tools and 6 KB of system prompt on each, Codex 19 KB of tools. A request event records a
large field (its JSON :data:`MIN_BYTES` or more) only when its value is not the one the
rollout's request events last recorded for it, and names it in ``params_as_before``
otherwise (docs/events.md). The rollout keeps each large field's SHA-256, not its value:
of its JSON as the harness ordered it (a value sent again with its keys in another
order is recorded again, so a rebuilt request is the one sent, key order and all). A
relayed body's members come written already (:class:`~rolltap.http.json_body.
EncodedMembers`: the depth check wrote them), so a field is not written again here.
Every ``model_request`` event of a rollout goes through one :class:`KeptParams`, so what
was last recorded is exact.

>>> kept = KeptParams()
>>> tools = [{"name": "Bash", "description": "x" * 2000}]
>>> list(kept.fields({"model": "m", "tools": tools})["params"])
['model', 'tools']
>>> kept.fields({"model": "m", "tools": tools})
{'params': {'model': 'm'}, 'params_as_before': ['tools']}
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from rolltap.http.json_body import EncodedMembers

__all__ = ["MIN_BYTES", "KeptParams"]

#: a field's JSON size from which it is recorded once (a smaller one costs less to store
#: than to compare)
MIN_BYTES = 1024


@dataclass(slots=True)
class KeptParams:
    """A rollout's large request fields as its request events last recorded them."""

    #: field -> SHA-256 of its value last recorded (its JSON)
    _digests: dict[str, bytes] = field(default_factory=dict)

    def fields(
        self, params: dict[str, Any], written: EncodedMembers | None = None
    ) -> dict[str, Any]:
        """What a request event records of ``params``: ``params`` without the large
        fields whose value is the one last recorded, and ``params_as_before`` naming
        them (absent when none is); the others are remembered as recorded. ``written``:
        the body's members as checked, whose JSON is reused."""
        same: list[str] = []
        for key, value in params.items():
            digest = _digest(value, None if written is None else written.json_of(key, value))
            if digest is None:
                self._digests.pop(key, None)  # recorded whole: nothing to refer back to
            elif self._digests.get(key) == digest:
                same.append(key)
            else:
                self._digests[key] = digest
        if not same:
            return {"params": params}
        kept = {k: v for k, v in params.items() if k not in same}
        return {"params": kept, "params_as_before": same}


def _digest(value: Any, data: bytes | memoryview | None) -> bytes | None:
    """A large value's SHA-256 (None: a small one, recorded whole every time); ``data``:
    its JSON, when written already."""
    if isinstance(value, str) and len(value) < MIN_BYTES:
        return None  # its JSON is no larger than its text, but for escapes
    if not isinstance(value, str | list | dict):
        return None
    if data is None:
        try:
            data = orjson.dumps(value)
        except orjson.JSONEncodeError:
            return None  # nested too deep: recorded as the event's writer can
    return hashlib.sha256(data).digest() if len(data) >= MIN_BYTES else None
