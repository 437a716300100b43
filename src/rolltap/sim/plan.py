"""Wire bytes rendered once per request body and reused, and what a dialect supplies.

A request's answer is serialized to :class:`Template` s whose only per-request holes are
ids and timestamps (see :func:`hole`). The holes are raw ``\\x00``-delimited
``orjson.Fragment`` s: orjson escapes every control character inside strings, so no value
a client sends can forge one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from rolltap.sim.config import SimConfig
from rolltap.sim.prefix import PromptTokens
from rolltap.sim.script import ScriptTurn

__all__ = [
    "CREATED",
    "VERSION",
    "Aborter",
    "Dialect",
    "Plan",
    "Template",
    "fragments",
    "hole",
    "sse",
    "versioned",
]


def hole(name: str) -> orjson.Fragment:
    """A per-request value, filled in by :meth:`Template.render`."""
    return orjson.Fragment(b"\x00" + name.encode() + b"\x00")


#: the request's Unix time, in seconds
CREATED = hole("created")
#: the weight version (a JSON string) when the answer is written: only in plans made with
#: :func:`versioned` true
VERSION = hole("version")


def versioned(config: SimConfig) -> bool:
    """Whether answers report the weight version (:data:`VERSION`): a version is set.

    The handler plans with a :attr:`SimConfig.policy_version` set once the engine has a
    version, so only whether it is set counts here; the version itself is the hole's.
    """
    return config.policy_version is not None


@dataclass(frozen=True, slots=True)
class Template:
    """Bytes with named holes; odd-indexed ``parts`` are hole names."""

    parts: tuple[bytes, ...]

    @classmethod
    def of(cls, data: bytes) -> Template:
        """Split serialized bytes at their holes."""
        return cls(tuple(data.split(b"\x00")))

    def render(self, holes: Mapping[bytes, bytes]) -> bytes:
        """The bytes with every hole filled from ``holes``."""
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        out = list(parts)
        for i in range(1, len(out), 2):
            out[i] = holes[out[i]]
        return b"".join(out)


_EMPTY = Template((b"",))

#: An aborted generation's answer: for a non-stream plan, given the tokens generated, the
#: whole partial answer; for a stream, given the events written (at least ``first_token``),
#: the events that end it.
Aborter = Callable[[int], "Plan"]


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything needed to answer one request body, stream or not."""

    stream: bool
    #: the non-stream JSON body (empty for a stream)
    body: Template
    #: the SSE events in order (empty when not streaming)
    events: tuple[Template, ...]
    #: all events joined, for the unpaced fast path
    joined: Template
    #: index of the first event carrying a token; it and the next ``token_events - 1``
    #: are paced at tokens_per_s
    first_token: int
    token_events: int
    #: tokens generated, for pacing a non-stream answer
    tokens: int
    #: whether the time-to-first-token delay applies (not to token counting)
    latency: bool
    #: the answer when the generation is aborted (:data:`Aborter`); ``None``: the route
    #: generates nothing to abort
    abort: Aborter | None = None

    @classmethod
    def whole(
        cls, body: bytes, *, tokens: int = 0, latency: bool = True, abort: Aborter | None = None
    ) -> Plan:
        """A non-stream answer."""
        return cls(False, Template.of(body), (), _EMPTY, 0, 0, tokens, latency, abort)

    @classmethod
    def streamed(
        cls, events: list[bytes], *, first_token: int, token_events: int,
        abort: Aborter | None = None,
    ) -> Plan:  # fmt: skip
        """A stream of SSE events."""
        templates = tuple(Template.of(e) for e in events)
        joined = Template.of(b"".join(events))
        return cls(True, _EMPTY, templates, joined, first_token, token_events, 0, True, abort)

    @property
    def nbytes(self) -> int:
        """Approximate memory held by the rendered bytes (for bounding caches)."""
        rendered = (self.body, self.joined, *self.events)
        return sum(len(part) for template in rendered for part in template.parts)


def sse(payload: dict[str, Any], event: str | None = None) -> bytes:
    """One server-sent event: an optional ``event:`` line and a JSON ``data:`` line."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def fragments(text: str, count: int = 3) -> list[str]:
    """``text`` in about ``count`` pieces, for streaming tool-call arguments."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one route shapes the wire; the handler does the rest (timing, faults, gates).

    ``ids`` maps each hole a dialect's templates use to the prefix of its per-request
    value: ``{"id": "chatcmpl-sim-"}`` fills ``hole("id")`` with ``"chatcmpl-sim-7"`` for
    request 7. :data:`CREATED` needs no entry.
    """

    name: str
    #: the plan for a request body; raises :class:`~rolltap.sim.content.BadRequest`
    plan: Callable[[dict[str, Any], SimConfig], Plan]
    #: an error response: ``(status, message, code, headers)``
    error: Callable[[int, str, str, dict[str, str]], web.Response]
    ids: Mapping[str, str]
    #: the ``malformed`` fault: a non-stream body that is not JSON
    malformed_body: bytes
    #: the ``malformed`` fault: an event that is not JSON, sent after the first
    malformed_event: bytes
    #: the request's prompt and answer in the simulator's tokens, for the prefix cache and
    #: the prefill cost (:mod:`rolltap.sim.prefix`); ``None``: the route has no prompt to fill
    prompt_tokens: Callable[[dict[str, Any], SimConfig], PromptTokens] | None = None
    #: the plan for a request body that a script answers (:mod:`rolltap.sim.script`);
    #: ``None``: the route takes no script (token counting, the token routes)
    plan_turn: Callable[[dict[str, Any], SimConfig, ScriptTurn], Plan] | None = None
    #: whether the route generates (the engine's pause holds it, an abort ends it)
    generates: bool = True
    _names: tuple[tuple[bytes, bytes], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = tuple((k.encode(), b'"' + v.encode()) for k, v in self.ids.items())
        object.__setattr__(self, "_names", names)

    def holes(self, number: int, created: int) -> dict[bytes, bytes]:
        """Hole values for request ``number`` made at Unix time ``created``."""
        n = str(number).encode() + b'"'
        out = {name: prefix + n for name, prefix in self._names}
        out[b"created"] = str(created).encode()
        return out
