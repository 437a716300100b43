"""Each model call of a rollout as it was sent: its whole conversation and every parameter.

A ``model_request`` event stores only what is new (docs/events.md): the messages past
the prefix an earlier request already recorded (``prefix_digest``, ``prefix_messages``,
its prompt-caching markers as sent in ``prefix_cache_control``) and the parameters but
the large ones recorded before with the same value (``params_as_before``).
:func:`sent_requests` reads a rollout's events in order and rebuilds each call.

>>> from rolltap.events import Event
>>> hi = {"role": "user", "content": "hi"}
>>> first = {"dialect": "chat", "prefix_digest": None, "prefix_messages": 0,
...          "messages": [hi], "params": {"model": "m", "tools": ["t"] * 300}}
>>> second = {"dialect": "chat", "prefix_digest": chain_digest([hi], "chat"),
...           "prefix_messages": 1, "messages": [{"role": "user", "content": "and?"}],
...           "params": {"model": "m"}, "params_as_before": ["tools"]}
>>> calls = sent_requests([Event(1, "model_request", 0.0, first),
...                        Event(2, "model_request", 0.0, second)])
>>> [len(c.messages) for c in calls], len(calls[1].params["tools"])
([1, 2], 300)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rolltap.events.cache_marks import MARKED_DIALECTS, with_marks
from rolltap.events.model import Event
from rolltap.events.prefix_digest import chain_digest, digests

__all__ = ["SentRequest", "chain_digest", "sent_requests"]


@dataclass(frozen=True, slots=True)
class SentRequest:
    """One ``model_request`` rebuilt. What is not among the events read (a log cut short,
    a fork read without its parent's records) is missing: ``messages`` is None when its
    prefix is, ``unresolved`` names the parameters that are."""

    seq: int
    intercept_id: str | None
    dialect: str | None
    messages: list[Any] | None
    #: the parameters as the event recorded them (a relayed call's ``model`` is the one
    #: sent upstream: its ``rewrites`` say from what)
    params: dict[str, Any]
    unresolved: tuple[str, ...] = ()


def sent_requests(events: Iterable[Event]) -> list[SentRequest]:
    """Every ``model_request`` of one rollout's ``events`` (in order), rebuilt."""
    out: list[SentRequest] = []
    #: (digest, length) -> a conversation whose first ``length`` messages it names
    prefixes: dict[tuple[str, int], list[Any]] = {}
    params: dict[str, Any] = {}  # each parameter as last recorded
    for event in events:
        if event.kind != "model_request":
            continue
        p = event.payload
        recorded, before = p.get("params") or {}, p.get("params_as_before") or []
        try:
            messages = _conversation(p, prefixes)
        except (TypeError, ValueError, KeyError, IndexError):
            messages = None  # a payload off its schema: not rebuilt
        out.append(
            SentRequest(
                event.seq, p.get("intercept_id"), p.get("dialect"), messages,
                {**{k: params[k] for k in before if k in params}, **recorded},
                tuple(k for k in before if k not in params),
            )
        )  # fmt: skip
        params.update(recorded)
        if messages is not None:  # each of its prefixes, by the digest a later call names
            for i, digest in enumerate(digests(messages, p.get("dialect"))):
                prefixes.setdefault((digest, i + 1), messages)
    return out


def _conversation(
    p: Mapping[str, Any], prefixes: dict[tuple[str, int], list[Any]]
) -> list[Any] | None:
    length, new = int(p.get("prefix_messages") or 0), p.get("messages") or []
    if not isinstance(new, list):
        raise TypeError("messages: not a list")
    if not length:
        return new
    earlier = prefixes.get((str(p.get("prefix_digest")), length))
    if earlier is None:
        return None
    prefix = earlier[:length]
    if p.get("dialect") in MARKED_DIALECTS:
        marks = [(int(i), int(j), v) for i, j, v in p.get("prefix_cache_control") or []]
        prefix = with_marks(prefix, marks)
    return prefix + new
